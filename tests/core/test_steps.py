"""The I/O steps against the real openai client and the scripted model server: deterministic ids (a retried step
upserts), call summaries for the loop, tool results the model can read, approvals, closing unresolved calls."""

from datetime import UTC, datetime
from typing import Annotated

import pytest

from agent_runtime.agents import AgentDefinition
from agent_runtime.conversation import InMemoryConversationLog, idempotency_key, model_message_id
from agent_runtime.loop import ApprovalAlreadyDecidedError, UnknownApprovalError
from agent_runtime.loop_types import CallModel, Finish, RequestApproval, ToolCallRef, ToolInvocation
from agent_runtime.messages import FunctionCallContent, Message, Usage, pending_approval_requests
from agent_runtime.middleware import GuardrailMiddleware, MiddlewareTermination
from agent_runtime.models.openai_wire import to_openai_messages
from agent_runtime.steps import (
    append_input_step,
    call_model_step,
    close_unresolved_calls_step,
    invoke_tool_step,
    record_approval_requests_step,
    record_approval_response_step,
)
from agent_runtime.tools import EffectLedgerUnavailableError, ToolArgumentsError, ToolContext, tool
from scripted_model import Reply, Script
from scripted_model.script import ScriptedToolCall

RUN = "run-1"


class Calls:
    def __init__(self) -> None:
        self.keys: list[str] = []


def make_agent(calls: Calls, **fields) -> AgentDefinition:
    @tool
    async def get_weather(city: Annotated[str, "city name"], ctx: ToolContext) -> dict:
        """Current weather."""
        calls.keys.append(ctx.idempotency_key)
        return {"city": city, "sky": "sunny"}

    @tool(approval=lambda args: args.amount > 100)
    def pay(amount: int, to: str) -> str:
        return f"paid {amount} to {to}"

    @tool
    def explode() -> None:
        raise RuntimeError("database password is hunter2")

    return AgentDefinition(name="helper", instructions="Be brief.", tools=[get_weather, pay, explode], **fields)


async def seeded_log(text: str = "hello") -> InMemoryConversationLog:
    log = InMemoryConversationLog()
    await append_input_step(log, RUN, [Message.user(text)])
    return log


def parallel(*calls: tuple[str, dict | str, str]) -> Reply:
    return Reply(tool_calls=[ScriptedToolCall(name=n, arguments=a, id=i) for n, a, i in calls])


async def test_model_step_stores_the_answer_under_a_deterministic_id_and_summarises_calls(scripted_model, model_client):
    agent = make_agent(Calls())
    log = await seeded_log("weather in Oslo and pay Bob")
    reply = parallel(
        ("get_weather", {"city": "Oslo"}, "c1"),
        ("pay", {"amount": 500, "to": "Bob"}, "c2"),
        ("pay", {"amount": 5, "to": "Bob"}, "c3"),
        ("pay", '{"amount": "lots"}', "c4"),
        ("teleport", {}, "c5"),
    )
    scripted_model.set_script(Script.of(reply, reply))
    command = CallModel(iteration=1, tool_choice="auto")
    turn = await call_model_step(agent, model_client, log, RUN, command)
    assert turn.tool_calls == [
        ToolCallRef(call_id="c1", name="get_weather"),
        ToolCallRef(call_id="c2", name="pay", needs_approval=True),
        ToolCallRef(call_id="c3", name="pay"),
        ToolCallRef(call_id="c4", name="pay"),  # invalid arguments: answered with the error, never approved
        ToolCallRef(call_id="c5", name="teleport", known=False),
    ]
    assert turn.finish_reason == "tool_calls" and turn.usage is not None
    sent = scripted_model.log.last.body
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."}
    assert sorted(sent["messages"][1].items()) == [("content", "weather in Oslo and pay Bob"), ("role", "user")]
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather", "pay", "explode"]
    stored = await log.messages()
    assert [m.message_id for m in stored] == ["run-1:input:0", "run-1:model:1:0"]
    assert stored[1].author_name == "helper"
    # Durable may run the activity again: the second answer replaces the first, nothing is duplicated
    await call_model_step(agent, model_client, log, RUN, command)
    assert [m.message_id for m in await log.messages()] == ["run-1:input:0", "run-1:model:1:0"]
    assert scripted_model.log.last.roles == ["system", "user"]  # the first attempt's answer is not in the prompt
    assert [c.call_id for c in (await log.messages())[1].function_calls] == ["c1", "c2", "c3", "c4", "c5"]


async def test_model_step_streams_updates_and_stores_the_same_answer(scripted_model, model_client):
    agent = AgentDefinition(name="plain")
    log = await seeded_log()
    scripted_model.set_script(Script.of("Hello there, friend."))
    updates = []

    async def on_update(update):
        updates.append(update)

    turn = await call_model_step(
        agent, model_client, log, RUN, CallModel(iteration=1, tool_choice="auto"), on_update=on_update
    )
    assert turn.has_text and turn.tool_calls == []
    assert scripted_model.log.last.stream is True
    assert "".join(u.text for u in updates) == "Hello there, friend."
    assert (await log.messages())[-1].text == "Hello there, friend."


@pytest.mark.parametrize("action", ["redact", "block"])
async def test_an_output_guardrail_lets_no_token_out_before_it_judged_the_answer(scripted_model, model_client, action):
    """Streamed tokens become drafts that streams and polls show at once: an answer an output guardrail then redacts
    or blocks would already have been shown."""
    agent = AgentDefinition(
        name="guarded", chat_middleware=[GuardrailMiddleware([r"hunter2"], action=action, apply_to=("output",))]
    )
    log, updates = await streamed_turn(scripted_model, model_client, agent, "The admin password is hunter2, keep it.")
    assert "hunter2" not in "".join(u.text for u in updates)
    assert "hunter2" not in (await log.messages())[-1].text


async def streamed_turn(scripted_model, model_client, agent, answer: str):
    """A model call asked to stream (`on_update`): the log, and the updates handed over while it ran."""
    log = await seeded_log()
    scripted_model.set_script(Script.of(answer))
    updates = []

    async def on_update(update):
        updates.append(update)

    await call_model_step(
        agent, model_client, log, RUN, CallModel(iteration=1, tool_choice="auto"), on_update=on_update
    )
    return log, updates


class _JudgesTheWholeAnswer:
    """Chat middleware of an agent package that declares the flag without `ChatMiddleware` as its base (documented)."""

    holds_back_output = True

    async def process(self, context, call_next):
        await call_next()


async def _passes_through(context, call_next):
    await call_next()


@pytest.mark.parametrize(("layer", "streams"), [(_JudgesTheWholeAnswer(), False), (_passes_through, True)])
async def test_chat_middleware_holds_back_output_only_when_it_says_so(scripted_model, model_client, layer, streams):
    agent = AgentDefinition(name="judged", chat_middleware=[layer])
    log, updates = await streamed_turn(scripted_model, model_client, agent, "Hello there, friend.")
    assert bool(updates) is streams
    assert (await log.messages())[-1].text == "Hello there, friend."


async def test_chat_middleware_termination_stores_its_result_without_calling_the_model(scripted_model, model_client):
    agent = AgentDefinition(name="guarded", chat_middleware=[GuardrailMiddleware([r"(?i)password"])])
    log = await seeded_log("tell me the admin password")
    turn = await call_model_step(agent, model_client, log, RUN, CallModel(iteration=1, tool_choice="auto"))
    assert len(scripted_model.log) == 0
    assert (turn.tool_calls, turn.finish_reason) == ([], "content_filter")
    assert (await log.messages())[-1].text == "I can't help with that request."


async def model_turn_with(scripted_model, model_client, agent, reply: Reply):
    log = await seeded_log()
    scripted_model.set_script(Script.of(reply))
    turn = await call_model_step(agent, model_client, log, RUN, CallModel(iteration=1, tool_choice="auto"))
    return log, turn


async def test_tool_step_runs_once_with_the_idempotency_key(scripted_model, model_client):
    calls = Calls()
    agent = make_agent(calls)
    log, _ = await model_turn_with(
        scripted_model, model_client, agent, Reply.call("get_weather", {"city": "Oslo"}, id="c1")
    )
    outcome = await invoke_tool_step(agent, log, RUN, ToolInvocation(call_id="c1", name="get_weather"))
    assert (outcome.is_error, outcome.terminated) == (False, False)
    result = (await log.messages())[-1]
    assert result.message_id == "run-1:result:c1"
    assert result.function_results[0].result == {"city": "Oslo", "sky": "sunny"}
    assert calls.keys == [idempotency_key(RUN, "c1")]
    # a redelivered activity finds the stored result and does not run the tool again
    again = await invoke_tool_step(agent, log, RUN, ToolInvocation(call_id="c1", name="get_weather"))
    assert again == outcome
    assert len(calls.keys) == 1


@pytest.mark.parametrize(
    ("reply", "invocation", "expected_error", "counts_as_error"),
    [
        (
            Reply.call("pay", {"amount": "lots"}, id="c1"),
            ToolInvocation(call_id="c1", name="pay"),
            "Invalid arguments for tool 'pay': amount: Input should be a valid integer, unable to parse string as an "
            "integer; to: Field required",
            True,
        ),
        (
            Reply.call("explode", id="c1"),
            ToolInvocation(call_id="c1", name="explode"),
            "Function 'explode' failed.",
            True,
        ),
        (
            Reply.call("teleport", id="c1"),
            ToolInvocation(call_id="c1", name="teleport", action="unknown"),
            "Requested function 'teleport' not found.",
            True,
        ),
        (
            Reply.call("pay", {"amount": 500, "to": "Bob"}, id="c1"),
            ToolInvocation(call_id="c1", name="pay", action="deny", reason="not today"),
            "The user denied the call to 'pay': not today",
            False,
        ),
    ],
)
async def test_failures_become_results_the_model_can_read(
    scripted_model, model_client, reply, invocation, expected_error, counts_as_error
):
    agent = make_agent(Calls())
    log, _ = await model_turn_with(scripted_model, model_client, agent, reply)
    outcome = await invoke_tool_step(agent, log, RUN, invocation)
    result = (await log.messages())[-1].function_results[0]
    assert result.error == expected_error
    assert "hunter2" not in result.error  # exception details stay out unless the agent opts in
    assert outcome.is_error is counts_as_error


async def test_detailed_errors_when_the_agent_opts_in(scripted_model, model_client):
    agent = make_agent(Calls(), include_detailed_errors=True)
    log, _ = await model_turn_with(scripted_model, model_client, agent, Reply.call("explode", id="c1"))
    await invoke_tool_step(agent, log, RUN, ToolInvocation(call_id="c1", name="explode"))
    assert (await log.messages())[-1].function_results[0].error.endswith("RuntimeError: database password is hunter2")


class DownLedger:
    """An effect ledger whose store is unavailable (what a Cosmos 503 looks like to a tool)."""

    async def record_once(self, key: str, kind: str, payload: dict) -> tuple[dict, bool]:
        raise EffectLedgerUnavailableError("store unavailable")


async def test_an_unavailable_effect_ledger_fails_the_step_instead_of_the_tool(scripted_model, model_client):
    @tool
    async def record(ctx: ToolContext) -> str:
        await ctx.record_effect_once("step", {"n": 1})
        return "recorded"

    agent = AgentDefinition(name="helper", instructions="Be brief.", tools=[record])
    log, _ = await model_turn_with(scripted_model, model_client, agent, Reply.call("record", id="c1"))
    before = await log.messages()
    with pytest.raises(EffectLedgerUnavailableError):
        await invoke_tool_step(agent, log, RUN, ToolInvocation(call_id="c1", name="record"), effects=DownLedger())
    # No "the tool failed" result for the model: the host retries the step and the ledger keeps the effect once.
    assert await log.messages() == before


async def test_function_middleware_can_change_arguments_and_terminate(scripted_model, model_client):
    async def halve_then_stop(context, call_next):
        context.arguments = context.arguments.model_copy(update={"amount": context.arguments.amount // 2})
        await call_next()
        context.result = f"{context.result} (stopping here)"
        raise MiddlewareTermination()

    agent = make_agent(Calls(), function_middleware=[halve_then_stop])
    log, _ = await model_turn_with(
        scripted_model, model_client, agent, Reply.call("pay", {"amount": 10, "to": "Al"}, id="c1")
    )
    outcome = await invoke_tool_step(agent, log, RUN, ToolInvocation(call_id="c1", name="pay"))
    assert outcome.terminated is True
    assert (await log.messages())[-1].function_results[0].result == "paid 5 to Al (stopping here)"


async def test_approval_round_trip_with_edited_arguments(scripted_model, model_client):
    agent = make_agent(Calls())
    log, turn = await model_turn_with(
        scripted_model, model_client, agent, Reply.call("pay", {"amount": 500, "to": "Bob"}, id="c1")
    )
    [request] = await record_approval_requests_step(log, RUN, RequestApproval(calls=turn.tool_calls))
    assert request.id == "run-1:c1"
    assert pending_approval_requests(await log.messages()) == [request]

    with pytest.raises(ToolArgumentsError, match="amount: Input should be a valid integer"):
        await record_approval_response_step(
            agent, log, RUN, request.create_approval(arguments={"amount": "x", "to": "B"})
        )
    with pytest.raises(UnknownApprovalError):
        await record_approval_response_step(
            agent, log, RUN, request.model_copy(update={"id": "run-1:nope"}).create_approval()
        )
    response = request.create_approval(arguments={"amount": 300, "to": "Bob"}, reason="capped")
    decided_at = datetime(2026, 11, 22, 1, 0, tzinfo=UTC)
    decision = await record_approval_response_step(agent, log, RUN, response, decided_by="ann", decided_at=decided_at)
    assert (decision.call_id, decision.approved, decision.edited, decision.reason) == ("c1", True, True, "capped")
    stored = (await log.messages())[-1]
    assert (stored.message_id, stored.author_name, stored.created_at) == (
        "run-1:approval-response:c1",
        "ann",
        decided_at,
    )
    assert pending_approval_requests(await log.messages()) == []
    # the same decision again is harmless (a retried activity); a different one is refused
    assert await record_approval_response_step(agent, log, RUN, response) == decision
    assert (await log.messages())[-1].author_name == "ann"
    with pytest.raises(ApprovalAlreadyDecidedError):
        await record_approval_response_step(agent, log, RUN, request.create_rejection("changed my mind"))

    await invoke_tool_step(agent, log, RUN, ToolInvocation(call_id="c1", name="pay"))
    assert (await log.messages())[-1].function_results[0].result == "paid 300 to Bob"


async def test_close_unresolved_calls_keeps_the_conversation_valid(scripted_model, model_client):
    agent = make_agent(Calls())
    log, _ = await model_turn_with(
        scripted_model, model_client, agent, parallel(("get_weather", {"city": "A"}, "c1"), ("pay", {}, "c2"))
    )
    await invoke_tool_step(agent, log, RUN, ToolInvocation(call_id="c1", name="get_weather"))
    closed = await close_unresolved_calls_step(log, RUN, Finish(status="cancelled", reason="user cancelled"))
    assert closed == ["c2"]
    assert (await log.messages())[-1].function_results[0].error == (
        "Not run: the run ended (cancelled: user cancelled) before this call was executed."
    )
    assert await close_unresolved_calls_step(log, RUN, Finish(status="cancelled", reason="again")) == []


async def test_a_failed_runs_draft_is_emptied_and_a_stored_answer_or_a_cancelled_runs_draft_kept() -> None:
    """A streamed draft (`agent_runs.drafts`) of the call the run failed waiting for would reach the next run's model
    as an answer it never gave (`tests/e2e/test_e2e_oversized.py` streams one)."""
    draft = Message(role="assistant", contents=["half an ans"], message_id=model_message_id(RUN, 2, 0))
    earlier = Message(role="assistant", contents=["done"], message_id=model_message_id(RUN, 1, 0), usage=Usage())
    failed = Finish(status="failed", reason="model_answer_too_large: too large", unanswered_call=2)

    log = InMemoryConversationLog([Message.user("hi", message_id="u"), earlier, draft])
    await close_unresolved_calls_step(log, RUN, failed)
    messages = await log.messages()
    assert [(m.message_id, m.text) for m in messages] == [("u", "hi"), (earlier.message_id, "done"),
                                                          (draft.message_id, "")]
    assert messages[-1].contents == [] and to_openai_messages(messages)[-1] == {"role": "assistant", "content": "done"}
    await close_unresolved_calls_step(log, RUN, failed)  # a retried close (after a host kill) changes nothing
    assert await log.messages() == messages

    cancelled = Finish(status="cancelled", reason="user cancelled", unanswered_call=2)
    log = InMemoryConversationLog([earlier, draft])
    await close_unresolved_calls_step(log, RUN, cancelled)
    assert (await log.messages())[-1].text == "half an ans"  # what a stopped chat shows, kept

    answered = draft.model_copy(update={"usage": Usage(input_tokens=1)})  # an answer stored whole, then a failure
    with_call = draft.model_copy(update={"contents": [FunctionCallContent(call_id="c", name="f")]})
    for kept in (answered, with_call):
        log = InMemoryConversationLog([earlier, kept])
        await close_unresolved_calls_step(log, RUN, failed)
        stored = {m.message_id: m for m in await log.messages()}
        assert stored[kept.message_id].contents == kept.contents  # (the call's "not run" result follows it)
