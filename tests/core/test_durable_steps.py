"""`durable_steps.Activity`: an activity declared once, registered and called from its declaration.

The orchestrator side runs for real: an inline Functions app (the real SDK's decorators) on devhost's engine with the
virtual clock, so the payload budget, the declared retry options and the validation of results are checked as Durable
runs them, including the retries."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator, Generator
from datetime import UTC, datetime
from typing import Any

import azure.durable_functions as df
import azure.functions as func
import pytest
from pydantic import BaseModel, ValidationError

from activities.mcp import discover_tools
from activities.model import call_model
from agent_runs.budget import PayloadBudgetExceeded
from agent_runs.contracts import StepFailure, ToolsDiscovered
from agent_runtime.loop_types import ModelTurn
from devhost.app_loader import FunctionIndex
from devhost.engine.api import DurableEngine, InstanceStatus, RuntimeStatus, VirtualClock
from durable_steps import DEFAULT_RETRY, Activity, activity

BUDGET = 1024


class Greeting(BaseModel):
    name: str
    padding: int = 0


class Greeted(BaseModel):
    text: str


ATTEMPTS: Counter[str] = Counter()  # attempts per activity and name: activities run in this process on the engine


@activity(budget=BUDGET)
async def greet(step: Greeting) -> Greeted:
    """Greets; `padding` makes the answer as large as asked."""
    ATTEMPTS[f"greet:{step.name}"] += 1
    return Greeted(text=f"Hello {step.name}!" + "." * step.padding)


@activity(retry=df.RetryOptions(first_retry_interval_in_milliseconds=1000, max_number_of_attempts=2))
async def greet_on_second_try(step: Greeting) -> Greeted:
    ATTEMPTS[f"second:{step.name}"] += 1
    if ATTEMPTS[f"second:{step.name}"] == 1:
        raise RuntimeError("the first attempt fails")
    return Greeted(text=f"Hello again {step.name}!")


@activity(retry=None)
async def greet_once(step: Greeting) -> str:
    ATTEMPTS[f"once:{step.name}"] += 1
    raise RuntimeError("this one always fails")


def _app() -> FunctionIndex:
    app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)
    for declared in (greet, greet_on_second_try, greet_once):
        declared.register(app)

    @app.orchestration_trigger(context_name="context")
    def greet_one(context: df.DurableOrchestrationContext) -> Generator[Any, Any, dict[str, str]]:
        greeted = yield from greet.run(context, Greeting.model_validate(context.get_input()))
        return {"text": greeted.text, "type": type(greeted).__name__}

    @app.orchestration_trigger(context_name="context")
    def greet_all(context: df.DurableOrchestrationContext) -> Generator[Any, Any, list[str]]:
        tasks = [greet.call(context, Greeting(name=name)) for name in context.get_input()]
        yield context.task_all(tasks)
        return [greet.result(task).text for task in tasks]

    @app.orchestration_trigger(context_name="context")
    def greet_untyped(context: df.DurableOrchestrationContext) -> Generator[Any, Any, Any]:
        return (yield from greet.run(context, context.get_input()))  # a dict, not the declared `Greeting`

    @app.orchestration_trigger(context_name="context")
    def greet_twice(context: df.DurableOrchestrationContext) -> Generator[Any, Any, str]:
        greeted = yield from greet_on_second_try.run(context, Greeting.model_validate(context.get_input()))
        return greeted.text

    @app.orchestration_trigger(context_name="context")
    def greet_no_retry(context: df.DurableOrchestrationContext) -> Generator[Any, Any, str]:
        return (yield from greet_once.run(context, Greeting.model_validate(context.get_input())))

    return FunctionIndex.from_app(app, "inline")


@pytest.fixture
async def engine() -> AsyncIterator[DurableEngine]:
    ATTEMPTS.clear()
    opened = await DurableEngine.open(_app(), clock=VirtualClock(datetime(2030, 1, 1, tzinfo=UTC)))
    yield opened
    await opened.close()


async def _run(engine: DurableEngine, orchestrator: str, payload: Any) -> InstanceStatus:
    instance_id = await engine.start_new(orchestrator, None, json.dumps(json.dumps(payload)))
    await engine.run_until_idle(skip_timers=True)  # retries wait on durable timers
    status = await engine.get_status(instance_id, show_history=True, show_history_output=True)
    assert status is not None
    return status


def _scheduled(status: InstanceStatus) -> list[str]:
    return [e["FunctionName"] for e in status.history_events or [] if e["EventType"] in ("TaskCompleted", "TaskFailed")]


# ----------------------------------------------------------------------------------------------- declaration


def test_the_declaration_comes_from_the_typed_function() -> None:
    assert (greet.name, greet.input_model, greet.output_type, greet.budget) == ("greet", Greeting, Greeted, BUDGET)
    assert greet.retry is DEFAULT_RETRY and greet_once.retry is None
    trigger = greet.trigger()
    assert trigger.__name__ == "greet" and trigger.__doc__ == greet.function.__doc__
    assert repr(greet) == "Activity('greet')"


def test_the_app_indexes_each_activity_under_its_name_with_one_payload_binding(engine: DurableEngine) -> None:
    indexed = {f.name: f for f in engine.index.activities()}
    assert set(indexed) == {"greet", "greet_on_second_try", "greet_once"}
    assert indexed["greet"].trigger_param == "payload"


def test_a_sync_function_is_refused() -> None:
    def sync_greet(step: Greeting) -> Greeted:
        return Greeted(text=step.name)

    with pytest.raises(TypeError, match="'sync_greet' must be an async function"):
        activity()(sync_greet)  # type: ignore[arg-type]


@pytest.mark.parametrize("case", ["no parameter annotation", "no return annotation", "two parameters", "none"])
def test_a_function_without_one_annotated_input_and_a_return_type_is_refused(case: str) -> None:
    async def unannotated(step):  # type: ignore[no-untyped-def]
        return Greeted(text=step.name)

    async def no_return(step: Greeting):  # type: ignore[no-untyped-def]
        return Greeted(text=step.name)

    async def two(step: Greeting, other: Greeting) -> Greeted:
        return Greeted(text=step.name + other.name)

    async def none() -> Greeted:
        return Greeted(text="")

    function = {"no parameter annotation": unannotated, "no return annotation": no_return, "two parameters": two}
    with pytest.raises(TypeError, match="must take one annotated parameter"):
        activity()(function.get(case, none))


def test_an_input_that_is_not_a_pydantic_model_is_refused() -> None:
    async def greet_dict(step: dict[str, str]) -> Greeted:
        return Greeted(text=step["name"])

    with pytest.raises(TypeError, match="its input must be a pydantic model"):
        activity()(greet_dict)  # type: ignore[type-var]


# ----------------------------------------------------------------------------------------------- Functions side


async def test_execute_takes_and_gives_json() -> None:
    assert await greet.execute({"name": "Ada"}) == {"text": "Hello Ada!"}
    with pytest.raises(ValidationError):
        await greet.execute({"nom": "Ada"})


async def test_an_output_over_the_budget_fails_the_activity() -> None:
    assert len((await greet.execute({"name": "Ada", "padding": BUDGET - 100}))["text"]) > BUDGET - 100
    with pytest.raises(PayloadBudgetExceeded, match="greet result is"):
        await greet.execute({"name": "Ada", "padding": BUDGET})


async def test_an_output_that_is_not_an_object_is_budgeted_too() -> None:
    @activity(budget=64)
    async def shout(step: Greeting) -> str:
        return step.name.upper() * (step.padding + 1)

    assert await shout.execute({"name": "ada"}) == "ADA"
    with pytest.raises(PayloadBudgetExceeded, match="shout result"):
        await shout.execute({"name": "ada", "padding": 30})


# ----------------------------------------------------------------------------------------------- orchestrator side


async def test_run_schedules_the_activity_by_its_name_and_returns_the_validated_model(engine: DurableEngine) -> None:
    status = await _run(engine, "greet_one", {"name": "Ada"})
    assert status.runtime_status == RuntimeStatus.Completed
    assert status.to_json()["output"] == {"text": "Hello Ada!", "type": "Greeted"}
    assert _scheduled(status) == ["greet"]


async def test_result_reads_each_task_of_a_fan_out(engine: DurableEngine) -> None:
    status = await _run(engine, "greet_all", ["Ada", "Grace", "Edsger"])
    assert status.to_json()["output"] == ["Hello Ada!", "Hello Grace!", "Hello Edsger!"]


async def test_an_input_over_the_budget_fails_the_orchestrator_before_anything_is_scheduled(
    engine: DurableEngine,
) -> None:
    status = await _run(engine, "greet_one", {"name": "x" * BUDGET})
    assert status.runtime_status == RuntimeStatus.Failed
    assert "greet input is" in str(status.to_json()["output"])
    assert _scheduled(status) == [] and not ATTEMPTS


async def test_an_input_of_another_type_is_refused_in_the_orchestrator(engine: DurableEngine) -> None:
    status = await _run(engine, "greet_untyped", {"name": "Ada"})
    assert status.runtime_status == RuntimeStatus.Failed
    assert "greet takes Greeting, not dict" in str(status.to_json()["output"])
    assert not ATTEMPTS


async def test_an_output_over_the_budget_fails_each_attempt_of_the_declared_retry(engine: DurableEngine) -> None:
    status = await _run(engine, "greet_one", {"name": "Ada", "padding": BUDGET})
    assert status.runtime_status == RuntimeStatus.Failed
    assert "greet result is" in str(status.to_json()["output"])
    assert ATTEMPTS["greet:Ada"] == DEFAULT_RETRY.max_number_of_attempts


async def test_the_declared_retry_options_are_the_ones_durable_uses(engine: DurableEngine) -> None:
    retried = await _run(engine, "greet_twice", {"name": "Ada"})
    assert (retried.runtime_status, retried.to_json()["output"]) == (RuntimeStatus.Completed, "Hello again Ada!")
    assert ATTEMPTS["second:Ada"] == 2
    once = await _run(engine, "greet_no_retry", {"name": "Ada"})
    assert once.runtime_status == RuntimeStatus.Failed
    assert ATTEMPTS["once:Ada"] == 1  # `retry=None`: one attempt


def test_parse_validates_what_durable_hands_back() -> None:
    assert greet.parse({"text": "hi"}) == Greeted(text="hi")
    with pytest.raises(ValidationError):
        greet.parse({"text": 3})
    with pytest.raises(ValidationError):
        greet.parse(None)


# ----------------------------------------------------------------------------------------------- the agent run's


@pytest.mark.parametrize(
    ("step", "recorded", "expected"),
    [
        # `discover_tools` results as histories hold them: a count, or a failure (no `kind` on the count).
        (discover_tools, {"tools": 2, "skipped_servers": ["optional"]}, ToolsDiscovered),
        (discover_tools, {"tools": 1, "skipped_tools": 3}, ToolsDiscovered),
        (discover_tools, {"kind": "step_failure", "code": "tool_discovery_failed", "message": "down"}, StepFailure),
        (call_model, {"kind": "model_turn", "has_text": True}, ModelTurn),
        (call_model, {"kind": "step_failure", "code": "cancelled", "message": "the run was cancelled"}, StepFailure),
    ],
)
def test_a_union_result_is_read_as_the_member_the_history_holds(
    step: Activity[Any, Any], recorded: dict[str, Any], expected: type[BaseModel]
) -> None:
    parsed = step.parse(recorded)
    assert type(parsed) is expected
    assert parsed.model_dump(mode="json", exclude_unset=True) == recorded
