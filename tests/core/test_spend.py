"""Run budgets and model prices: the loop stops before the model call that would cross a limit (`budget_exceeded`,
status `completed`, partial answer kept), per agent and per run; a run may only tighten the agent's budget.
The in-process runner is driven against the scripted model through the real openai client."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agent_runtime.agents import AgentDefinition
from agent_runtime.conversation import InMemoryConversationLog
from agent_runtime.loop import REASON_BUDGET_EXCEEDED, AgentLoop
from agent_runtime.loop_types import CallModel, Finish, LoopConfig, ModelTurn, ToolCallRef, ToolOutcome, ToolResults
from agent_runtime.messages import Message, Usage
from agent_runtime.middleware.retry import RetryMiddleware
from agent_runtime.models.retry import RetryPolicy
from agent_runtime.models.retrying import RetryingModelClient
from agent_runtime.runner import AgentRunner
from agent_runtime.settings import ModelSettings
from agent_runtime.spend import BudgetAboveAgentLimitError, ModelPrice, ModelPrices, RunBudget
from agent_runtime.steps import append_input_step, call_model_step
from agent_runtime.tools import tool
from scripted_model import Fault, Reply, Script
from scripted_model.script import ScriptedToolCall

PRICES = ModelPrices({"scripted-model": ModelPrice(input=1000, output=2000)})  # per 1M: 100 in + 10 out = 0.12


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value-of-{key}"


def agent(**fields) -> AgentDefinition:
    return AgentDefinition(name="frugal", instructions="Be brief.", tools=[lookup], **fields)


def step(key: str, text: str | None = None) -> Reply:
    """A model turn calling `lookup` (with some text: the partial answer) that reports 100 in / 10 out tokens."""
    return Reply(
        text=text,
        tool_calls=[ScriptedToolCall(name="lookup", arguments={"key": key})],
        usage={"prompt_tokens": 100, "completion_tokens": 10},
    )


FOUR_CALLS = Script.of(step("a", "Looking up a."), step("b", "Now b."), step("c", "And c."), "All done.")


# --------------------------------------------------------------------------------------------------- the loop


def turn(tokens: int, cost: float | None = None) -> ModelTurn:
    return ModelTurn(
        tool_calls=[ToolCallRef(call_id="c", name="lookup")],
        usage=Usage(input_tokens=tokens, total_tokens=tokens, cost=cost),
    )


def drive(budget: RunBudget, turns: list[ModelTurn]) -> tuple[int, Finish | None]:
    """Feed model turns (each followed by its tool result); returns the model calls issued and how it ended."""
    loop = AgentLoop(LoopConfig(budget=budget))
    command = loop.start()
    calls = 0
    for model_turn in turns:
        if isinstance(command, Finish):
            break
        assert isinstance(command, CallModel)
        calls += 1
        loop.send(model_turn)
        command = loop.send(ToolResults(outcomes=[ToolOutcome(call_id="c")]))
    return calls, command if isinstance(command, Finish) else None


@pytest.mark.parametrize(
    ("budget", "turns", "calls"),
    [
        (RunBudget(max_model_calls=2), [turn(10)] * 5, 2),
        (RunBudget(max_total_tokens=25), [turn(10)] * 5, 3),  # 10, 20 < 25: a third call; 30 >= 25: stop
        (RunBudget(max_total_tokens=20), [turn(10)] * 5, 2),  # reaching the limit exactly stops too
        (RunBudget(max_cost=0.5), [turn(10, cost=0.2)] * 5, 3),
        (RunBudget(max_cost=0.5), [turn(10, cost=None)] * 5, 5),  # unpriced calls do not count
    ],
)
def test_the_loop_stops_before_the_call_that_would_cross_a_limit(budget, turns, calls) -> None:
    issued, finish = drive(budget, turns)
    assert issued == calls
    if calls < len(turns):
        assert finish is not None and (finish.status, finish.reason) == ("completed", REASON_BUDGET_EXCEEDED)
    assert finish is None or finish.usage.total_tokens == 10 * calls


def test_the_budget_survives_a_state_round_trip() -> None:
    loop = AgentLoop(LoopConfig(budget=RunBudget(max_model_calls=1)))
    loop.start()
    loop.send(turn(10, cost=0.25))
    resumed = AgentLoop(state=type(loop.state).model_validate_json(loop.state.model_dump_json()))
    finish = resumed.send(ToolResults(outcomes=[ToolOutcome(call_id="c")]))
    assert isinstance(finish, Finish) and finish.reason == REASON_BUDGET_EXCEEDED
    assert finish.usage.cost == 0.25


# --------------------------------------------------------------------------------------------------- rules


def test_a_request_may_only_tighten_the_agents_budget() -> None:
    frugal = agent(budget=RunBudget(max_total_tokens=1000, max_cost=2.0))
    assert frugal.run_budget(None) == RunBudget(max_total_tokens=1000, max_cost=2.0)
    assert frugal.run_budget(RunBudget(max_total_tokens=10, max_model_calls=3)) == RunBudget(
        max_total_tokens=10, max_model_calls=3, max_cost=2.0
    )
    with pytest.raises(BudgetAboveAgentLimitError) as raised:
        frugal.run_budget(RunBudget(max_cost=2.5))
    assert raised.value.limit == "max_cost"
    assert agent().run_budget(None) is None  # no limits anywhere: no budget
    assert agent().run_budget(RunBudget(max_model_calls=9)) == RunBudget(max_model_calls=9)


def test_limits_must_be_positive() -> None:
    for bad in ({"max_total_tokens": 0}, {"max_model_calls": -1}, {"max_cost": 0}, {"max_tokens": 5}):
        with pytest.raises(ValidationError):
            RunBudget.model_validate(bad)


def test_model_prices() -> None:
    prices = ModelPrices.parse(
        '{"gpt-4o-mini": {"input": 0.15, "output": 0.6}, "gpt-4o": {"input": 2.5, "output": 10}}'
    )
    usage = Usage(input_tokens=1_000_000, output_tokens=500_000, total_tokens=1_500_000)
    assert prices.cost_of(usage, "gpt-4o-mini") == pytest.approx(0.45)
    assert prices.cost_of(usage, None, "gpt-4o-mini-2024-07-18") == pytest.approx(0.45)  # dated: the family's price
    assert prices.cost_of(usage, "gpt-4o-2024-08-06") == pytest.approx(7.5)
    assert prices.cost_of(usage, "llama3") is None
    assert not ModelPrices.parse("") and not ModelPrices.parse(None)
    for bad in ("not json", '{"m": {"input": 1}}', '{"m": {"input": -1, "output": 1}}', "[1]"):
        with pytest.raises(ValueError, match="MODEL_PRICES"):
            ModelPrices.parse(bad)
    with pytest.raises(ValidationError):
        ModelSettings(MODEL_PRICES="{oops")
    assert ModelSettings(MODEL_PRICES='{"m": {"input": 1, "output": 2}}').prices().price_for(["m"]) == ModelPrice(
        input=1, output=2
    )


def test_usage_sums_cost_only_when_something_was_priced() -> None:
    assert (Usage() + Usage()).cost is None
    assert (Usage(cost=0.1) + Usage() + Usage(cost=0.2)).cost == pytest.approx(0.3)


# --------------------------------------------------------------------------------------------------- the runner


@pytest.mark.parametrize(
    ("agent_budget", "run_budget", "model_calls"),
    [
        (RunBudget(max_model_calls=2), None, 2),
        (None, RunBudget(max_model_calls=2), 2),
        (RunBudget(max_total_tokens=220), None, 2),  # 110, 220: the third call would cross it
        (None, RunBudget(max_total_tokens=111), 2),
        (RunBudget(max_cost=0.3), None, 3),  # 0.12, 0.24 < 0.3: a third call; 0.36 >= 0.3: stop
        (RunBudget(max_cost=1.0), RunBudget(max_cost=0.2), 2),
    ],
)
async def test_the_runner_ends_a_run_that_spent_its_budget(
    scripted_model, model_client, agent_budget, run_budget, model_calls
) -> None:
    scripted_model.set_script(FOUR_CALLS)
    runner = AgentRunner(agent(budget=agent_budget), model_client, budget=run_budget, prices=PRICES)
    result = await runner.run("Look up a, b and c")

    assert (result.status, result.reason) == ("completed", "budget_exceeded")
    assert len(scripted_model.log.requests) == model_calls
    assert result.text == ["Looking up a.", "Now b.", "And c."][model_calls - 1]  # the partial answer
    assert result.usage.total_tokens == 110 * model_calls
    assert result.usage.cost == pytest.approx(0.12 * model_calls)
    assert result.messages[-1].role == "tool"  # the last batch ran; only the next model call was skipped


async def test_a_run_under_its_budget_completes_normally(scripted_model, model_client) -> None:
    scripted_model.set_script(FOUR_CALLS)
    runner = AgentRunner(agent(budget=RunBudget(max_model_calls=4, max_cost=1.0)), model_client, prices=PRICES)
    result = await runner.run("Look up a, b and c")
    assert (result.status, result.reason, result.text) == ("completed", "stop", "All done.")
    assert len(scripted_model.log.requests) == 4


async def test_the_runner_refuses_a_budget_above_the_agents(model_client) -> None:
    with pytest.raises(BudgetAboveAgentLimitError):
        AgentRunner(agent(budget=RunBudget(max_model_calls=2)), model_client, budget=RunBudget(max_model_calls=3))


# --------------------------------------------------------------------------------------------------- what counts


async def no_wait(seconds: float) -> None:
    """The retry policy's sleep: the test does not wait out backoff delays."""


async def test_a_retried_call_counts_the_usage_of_the_attempt_it_replaced(scripted_model, model_client) -> None:
    """The provider answered (and billed 110 tokens) but the answer was unusable; the retry's 110 tokens are not
    the call's only ones: the run reaches its 300-token budget after two calls, not three."""
    scripted_model.set_script(FOUR_CALLS)
    scripted_model.fail_next(Fault.billed(usage={"prompt_tokens": 100, "completion_tokens": 10}))
    client = RetryingModelClient(model_client, RetryPolicy(max_attempts=3), sleep=no_wait)
    runner = AgentRunner(agent(budget=RunBudget(max_total_tokens=300)), client, prices=PRICES)
    result = await runner.run("Look up a, b and c")

    assert (result.status, result.reason, result.text) == ("completed", "budget_exceeded", "Now b.")
    assert [r.status for r in scripted_model.log.requests] == [200, 200, 200]  # the billed failure, then two calls
    assert result.usage.total_tokens == 330
    assert result.usage.cost == pytest.approx(0.36)
    assert result.usage.estimated is None


async def test_the_retry_middleware_counts_the_attempts_it_replaced(scripted_model, model_client) -> None:
    scripted_model.set_script(FOUR_CALLS)
    scripted_model.fail_next(Fault.billed(usage={"prompt_tokens": 100, "completion_tokens": 10}), times=2)
    retrying = agent(budget=RunBudget(max_total_tokens=300), chat_middleware=[RetryMiddleware(sleep=no_wait)])
    result = await AgentRunner(retrying, model_client).run("Look up a, b and c")

    assert (result.reason, result.text, result.usage.total_tokens) == ("budget_exceeded", "Looking up a.", 330)
    assert len(scripted_model.log.requests) == 3


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_answer_without_usage_is_estimated_and_says_so(scripted_model, model_client, streamed) -> None:
    """A server that reports no usage (asked for it or not) does not make a token budget free: each answer is
    estimated from the characters sent and received, and the run's usage is marked `estimated`."""
    scripted_model.set_script(FOUR_CALLS)
    scripted_model.report_usage = False
    updates: list = []

    async def on_update(update) -> None:
        updates.append(update)

    runner = AgentRunner(
        agent(budget=RunBudget(max_total_tokens=60)), model_client, on_update=on_update if streamed else None
    )
    result = await runner.run("Look up a, b and c")

    assert result.usage.estimated is True
    assert result.reason == "budget_exceeded"
    assert 0 < len(scripted_model.log.requests) < 4
    first = scripted_model.log.requests[0].body
    assert first.get("stream_options") == ({"include_usage": True} if streamed else None)  # usage was asked for
    per_call = result.usage.total_tokens / len(scripted_model.log.requests)
    assert 20 <= per_call <= 200  # ~ a quarter of the JSON sent (instructions, input, the tool) and answered


async def test_a_redelivered_model_step_counts_the_answer_it_replaces_once(scripted_model, model_client) -> None:
    """A model step run again after its answer was stored (its activity failed later) asks the model again: both
    answers were billed. The stored answer carries what its iteration was billed, so a third run adds exactly one
    more answer, never the first twice."""
    scripted_model.set_script(Script.of(*(step("a", "Looking up a.") for _ in range(3))))
    log = InMemoryConversationLog()
    frugal = agent()
    await append_input_step(log, "run-1", [Message.user("Look up a")])
    command = CallModel(iteration=0, tool_choice="auto")
    turns = [await call_model_step(frugal, model_client, log, "run-1", command, prices=PRICES) for _ in range(3)]

    assert [t.usage.total_tokens for t in turns] == [110, 220, 330]
    assert turns[-1].usage.cost == pytest.approx(0.36)
    answers = [m for m in await log.read() if m.role == "assistant"]
    assert len(answers) == 1 and answers[0].usage.total_tokens == 330


async def test_a_streamed_answer_without_usage_is_estimated_as_the_same_answer_unstreamed(
    scripted_model, model_client
) -> None:
    """A tool call streams in many fragments, each naming the call: its name is part of the answer once, so the
    streamed estimate is the unstreamed one (not one name per fragment)."""
    long_call = Reply(
        tool_calls=[ScriptedToolCall(name="lookup", arguments={"key": "k" * 2000})],
        usage={"prompt_tokens": 100, "completion_tokens": 10},
    )
    scripted_model.set_script(Script.of(long_call, long_call))
    scripted_model.report_usage = False
    estimates = []
    for streamed in (False, True):
        log = InMemoryConversationLog()
        await append_input_step(log, "run-1", [Message.user("Look up k")])

        async def on_update(update) -> None:
            pass

        command = CallModel(iteration=0, tool_choice="auto")
        answer = on_update if streamed else None
        turn = await call_model_step(agent(), model_client, log, "run-1", command, on_update=answer)
        estimates.append(turn.usage.output_tokens)
    assert abs(estimates[0] - estimates[1]) <= 1  # the unstreamed arguments are re-encoded (`{"key":` not `{"key": `)
