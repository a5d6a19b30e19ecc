"""`Activity`: the single declaration of a durable activity, in the spirit of Temporal's
`execute_activity(fn, arg)`.

An activity is written as a typed coroutine (`async def call_model(step: ModelCallInput) -> ModelTurn | StepFailure`)
and declared with `@activity()`; its name, input model and output type come from the function itself, so nothing is
written twice and no orchestrator names an activity by a string:

- `function_app.py` registers it: `call_model.register(app)` (the trigger takes Durable's JSON payload, validates it
  into the input model, and hands back the output as JSON within the payload budget);
- an orchestrator calls it: `task = call_model.call(context, step_input)` (the input's budget is checked there, and
  the retry options are the declaration's), then reads the validated result: `call_model.result(task)`;
  or in one line when no race is involved: `output = yield from call_model.run(context, step_input)`.

The budget is enforced on both sides because Durable replays every input and output on every episode (see
`agent_runs.budget`): an input over it fails in the orchestrator (deterministically, the same on replay); an output
over it fails the activity, and Durable's retry runs it again (activities are idempotent by their seq/ids).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Generator
from datetime import timedelta
from typing import Any, Generic, TypeVar, get_type_hints

import azure.durable_functions as df
from azure.durable_functions.models.Task import TaskBase
from pydantic import BaseModel, TypeAdapter

from agent_runs.budget import PAYLOAD_BUDGET_BYTES, within_budget
from agent_runs.wire import ReplayedPayloads, compact_json

InputT = TypeVar("InputT", bound=BaseModel)
OutputT = TypeVar("OutputT")

# Activity-level retries cover a crashed worker or a transient error that outlived the in-activity retry policy.
DEFAULT_RETRY = df.RetryOptions(first_retry_interval_in_milliseconds=2000, max_number_of_attempts=3)
# For a step that must not be left half done (a run's close, a workflow's cancel of its children) whose activity
# failed for good - the store down, or throttling, for longer than `DEFAULT_RETRY` - the orchestration waits these
# durable timers between further tries, about an hour in all, rather than end with its records open. Each try is an
# activity's attempts and a timer in history.
OUTAGE_RETRIES = tuple(timedelta(seconds=s) for s in (15, 30, 60, 120, 300, 600, 900, 900, 900))


class Activity(Generic[InputT, OutputT]):
    """A durable activity: its function, input model, output type, retry options and payload budget."""

    def __init__(
        self,
        function: Callable[[InputT], Awaitable[OutputT]],
        *,
        input_model: type[InputT],
        output_type: Any,
        retry: df.RetryOptions | None = DEFAULT_RETRY,
        budget: int = PAYLOAD_BUDGET_BYTES,
        compact: bool = False,
    ) -> None:
        self.function = function
        self.name: str = function.__name__
        self.input_model = input_model
        self.output_type = output_type
        self.retry = retry
        self.budget = budget
        self.compact = compact
        self._output = TypeAdapter(output_type)
        self._inputs = ReplayedPayloads(f"{self.name} input", budget) if compact else None

    def __repr__(self) -> str:
        return f"Activity({self.name!r})"

    # ----------------------------------------------------------------------------------------------- orchestrator side

    def call(self, context: df.DurableOrchestrationContext, step_input: InputT) -> TaskBase:
        """Schedule the activity (with the declared retry options); yield the task, or race it."""
        return self.schedule(context, self.payload(step_input))

    def payload(self, step_input: InputT, *, replayed: bool = True) -> dict[str, Any]:
        """The input as Durable carries it (compact if declared), checked against the budget. `replayed`: whether an
        earlier episode built it too, most likely (`agent_runs.wire.ReplayedPayloads`)."""
        if not isinstance(step_input, self.input_model):
            raise TypeError(f"{self.name} takes {self.input_model.__name__}, not {type(step_input).__name__}")
        if self._inputs is not None:
            return self._inputs.payload(step_input, replayed=replayed)
        return within_budget(step_input.model_dump(mode="json"), f"{self.name} input", self.budget)

    def schedule(self, context: df.DurableOrchestrationContext, payload: dict[str, Any]) -> TaskBase:
        """Schedule the activity with a `payload()` (with the declared retry options)."""
        if self.retry is None:
            return context.call_activity(self.name, payload)
        return context.call_activity_with_retry(self.name, self.retry, payload)

    def result(self, task: TaskBase) -> OutputT:
        """The completed task's output, validated into the declared output type."""
        return self.parse(task.result)

    def parse(self, value: Any) -> OutputT:
        """The output as Durable handed it back (JSON), validated into the declared output type."""
        return self._output.validate_python(value)

    def run(self, context: df.DurableOrchestrationContext, step_input: InputT) -> Generator[TaskBase, Any, OutputT]:
        """`output = yield from step.run(context, step_input)`: call, wait, validate (a failure raises, as a yielded
        failed task does)."""
        value = yield self.call(context, step_input)
        return self.parse(value)

    # ----------------------------------------------------------------------------------------------- Functions side

    async def execute(self, payload: Any) -> Any:
        """What the activity trigger runs: Durable's JSON in, JSON out (within the budget)."""
        output = await self.function(self.input_model.model_validate(payload))
        if self.compact and isinstance(output, BaseModel):
            dumped = compact_json(output, self.parse, read_as=self.output_type)
        else:
            dumped = self._output.dump_python(output, mode="json")
        return within_budget_any(dumped, f"{self.name} result", self.budget)

    def trigger(self) -> Callable[[Any], Awaitable[Any]]:
        """The function the Functions app registers, named as the activity (the host calls activities by name)."""
        execute = self.execute

        async def trigger(payload: Any) -> Any:
            return await execute(payload)

        trigger.__name__ = trigger.__qualname__ = self.name
        trigger.__doc__ = self.function.__doc__
        return trigger

    def register(self, app: df.DFApp) -> None:
        app.activity_trigger(input_name="payload")(self.trigger())


def within_budget_any(value: Any, what: str, budget: int) -> Any:
    """`within_budget` for any JSON value (an activity may return a string or null as well as an object)."""
    if isinstance(value, dict | list):
        return within_budget(value, what, budget)
    return within_budget([value], what, budget)[0]


def activity(
    *, retry: df.RetryOptions | None = DEFAULT_RETRY, budget: int = PAYLOAD_BUDGET_BYTES, compact: bool = False
) -> Callable[[Callable[[InputT], Awaitable[OutputT]]], Activity[InputT, OutputT]]:
    """Declare an activity from its typed coroutine: the one parameter's annotation is the input model, the return
    annotation the output type. `compact`: its input and result leave out fields at their zero default
    (`agent_runs.wire`); the reader takes either shape, so it can be turned on for an activity in flight, but not for
    one whose payloads a golden replay pins byte for byte (the workflow's)."""

    def declare(function: Callable[[InputT], Awaitable[OutputT]]) -> Activity[InputT, OutputT]:
        if not inspect.iscoroutinefunction(function):
            raise TypeError(f"activity {function.__name__!r} must be an async function")
        hints = get_type_hints(function)
        parameters = list(inspect.signature(function).parameters)
        if len(parameters) != 1 or parameters[0] not in hints or "return" not in hints:
            raise TypeError(
                f"activity {function.__name__!r} must take one annotated parameter (its input model) and annotate "
                "its return type"
            )
        input_model = hints[parameters[0]]
        if not (isinstance(input_model, type) and issubclass(input_model, BaseModel)):
            raise TypeError(f"activity {function.__name__!r}: its input must be a pydantic model, not {input_model!r}")
        return Activity(
            function, input_model=input_model, output_type=hints["return"], retry=retry, budget=budget, compact=compact
        )

    return declare
