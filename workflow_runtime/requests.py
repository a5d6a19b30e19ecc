"""What the `WorkflowDriver` asks the orchestrator to do (requests) and what the orchestrator tells it happened
(events). The orchestrator turns each request into durable tasks, or answers it from the events it already
received, and feeds the outcome back as one of the events listed with the request:

- `TakeCancel` (between steps): take a cancel that arrived while no wait was on -> `Cancelled` | `Silent`;
- `CallActivity`: `activity.call(context, input)`, its output validated by the activity -> `ActivityCompleted`;
- `RunChildRuns`: the runs as `agent_run` sub-orchestrations, raced with cancel -> `ChildRunsEnded` | `Cancelled`;
- `DrainChildRuns`: let the child runs of the last `RunChildRuns` end (after a cancel) -> `ChildRunsDrained`;
- `Sleep`: a timer raced with cancel (a cancel received before wins) -> `TimerFired` | `Cancelled`;
- `CheckSignal`: whether one of the events already rang (no task) -> `Rang` | `Silent`;
- `WaitForSignal`: one of the events, the timer (if any) or cancel -> `Rang` | `TimerFired` | `Cancelled`;
- `WaitForDecision`: the decision's event, the deadline or cancel -> `Rang` | `TimerFired` | `Cancelled`;
- `ContinueAsNew`: continue as new with the input (the orchestrator returns; the driver is done);
- `Finished`: publish the final progress and return the outcome.

Any request may also fail (an activity failed for good, a payload over the budget): then the event is `Failed`,
with a stable code and a message safe for clients.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent_runs.contracts import RunInput
from durable_steps import Activity
from workflow_runtime.contracts import WorkflowInput, WorkflowOutcome


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)


# ----------------------------------------------------------------------------------------------------- requests


class TakeCancel(_Message):
    """Between steps: did a cancel arrive meanwhile?"""


class CallActivity(_Message):
    activity: Activity[Any, Any]
    input: BaseModel


class RunChildRuns(_Message):
    runs: list[RunInput]
    fail_fast: bool = False
    """Stop waiting when a child rings that it failed (`child_failed_event`); the others are then still running."""


class DrainChildRuns(_Message):
    """The workflow was cancelled while its child runs worked: let them end (their writes land first)."""


class Sleep(_Message):
    until: datetime


class Pause(_Message):
    """A durable timer that a cancel does not cut short: the workflow is being cancelled already, and waits before
    it tries again to cancel its children."""

    until: datetime


class CheckSignal(_Message):
    events: list[str]
    """Once-only event names (a signal's and the following one's, whose ring implies this one was sent)."""


class WaitForSignal(_Message):
    events: list[str]
    until: datetime | None = None


class WaitForDecision(_Message):
    event: str
    until: datetime


class ContinueAsNew(_Message):
    input: WorkflowInput


class Finished(_Message):
    outcome: WorkflowOutcome
    closed_before: bool = False
    """The workflow's record was closed before the orchestration ran a step (its start gave it up): it ends as the
    record says, with nothing more run."""


Request = (
    TakeCancel
    | CallActivity
    | RunChildRuns
    | DrainChildRuns
    | Sleep
    | Pause
    | CheckSignal
    | WaitForSignal
    | WaitForDecision
    | ContinueAsNew
    | Finished
)


# ----------------------------------------------------------------------------------------------------- events


class ActivityCompleted(_Message):
    output: Any = Field(description="the activity's output, validated into its declared type")


class ChildRunsEnded(_Message):
    crash: str | None = None
    """A child run's orchestration failed (its record says why); the safe message naming its correlation id."""
    running: list[str] = []
    """A fail-fast step's child failed while these were still running (the step cancels them)."""


class ChildRunsDrained(_Message):
    pass


class TimerFired(_Message):
    pass


class Rang(_Message):
    pass


class Silent(_Message):
    pass


class Cancelled(_Message):
    pass


# `Failed.code` of an activity that failed for good, its retries spent (`orchestrators.failures` reports it).
ACTIVITY_FAILED = "activity_failed"


class Failed(_Message):
    code: str
    message: str
    # The activity failed because the store was down (it raised `StoreUnavailableError`): the one failure a try after
    # a wait may mend (`WorkflowDriver._keep_trying`). A bug, or a payload over the budget, fails alike each time.
    outage: bool = False


Event = ActivityCompleted | ChildRunsEnded | ChildRunsDrained | TimerFired | Rang | Silent | Cancelled | Failed
