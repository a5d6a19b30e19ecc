"""Payloads between the workflow API, the `workflow` orchestrator and its activities (all small: references only).

The orchestrator carries a `WorkflowState` (program counter, journal references, monitor state); content (the
input, step outputs, signal payloads) lives in the store: the workflow's record and its journal (messages of the
workflow's control session, one per finished step, at seqs the driver hands out).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_serializer,
    model_serializer,
)

from agent_runs.contracts import FinishResult, Resumable, RunInput
from notifications.contracts import NotificationFlags
from session_store import ApprovalStatus
from telemetry.trace_context import RunTrace

ORCHESTRATOR_NAME = "workflow"
CANCEL_EVENT = "cancel"  # the same event name as agent runs: `/api/runs/{id}/cancel` works on workflows too
SIGNAL_EVENT_PREFIX = "signal:"
CHILD_FAILED_PREFIX = "child_failed:"
WORKFLOW_AGENT_PREFIX = "workflow:"  # the agent label of a workflow's control session
JOURNAL_ROLE = "workflow"
CONTROL_SESSION_PREFIX = "wf-"  # reserved: no client-supplied session id starts with it (http_api/reserved_ids.py)

WorkflowStatus = Literal["queued", "in_progress", "requires_action", "waiting", "cancelling", "completed", "failed",
                         "cancelled"]
FinalStatus = Literal["completed", "failed", "cancelled"]


def signal_event(name: str, index: int) -> str:
    """The event announcing signal `index` (1, 2, ...) of `name`: one name per signal, never shared. The Python SDK
    keeps a single deferred event per name (a second overwrites the first and it completes every later waiter of
    the name), so a name shared by several signals would lose or replay them (docs/durable-protocol.md §5)."""
    return f"{SIGNAL_EVENT_PREFIX}{name}:{index}"


def child_failed_event(run_id: str) -> str:
    """The event a fail-fast parallel step's child run raises on its workflow when it fails: one name per child."""
    return f"{CHILD_FAILED_PREFIX}{run_id}"


def control_session_id(run_id: str) -> str:
    """The session that holds a workflow's run record, its approvals and its journal."""
    return f"{CONTROL_SESSION_PREFIX}{run_id}"


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WorkflowRef(_Payload, NotificationFlags):
    run_id: str
    workflow: str
    package: str = "workflows"
    """The package that defines the workflow: the orchestrator loads the definition from it, reading no setting."""
    session_id: str | None = None
    """The workflow's conversation session (steps with `session="workflow"`), if the workflow has one."""
    trace: RunTrace | None = None
    """The workflow's trace: its step spans and its agent runs' spans all belong to it."""
    looks_continue: bool = Field(default=False, exclude_if=lambda looks_continue: not looks_continue)
    """Set by workflows started since a step waiting for a child rewound on its own continues as new every few
    looks (`AwaitedChildren`); histories from before look on in one execution."""
    fails_fast: bool = Field(default=False, exclude_if=lambda fails_fast: not fails_fast)
    """Set by workflows started since a parallel step fails fast (`ParallelStep.on_branch_failure`): its children ring
    the workflow when they fail; histories from before wait for every branch."""
    outlasts_store_outages: bool = Field(default=False, exclude_if=lambda outlasts: not outlasts)
    """Set by workflows started since the steps that must not be left half done - the workflow's cancel of its
    children, a fail-fast step's of its other branches, the workflow's close - are tried again on durable timers
    (`durable_steps.OUTAGE_RETRIES`) when their activity fails for good (the store down for longer than its
    retries); a cancel of children given up then waits for them to end rather than fail the step with them still
    running. Histories from before fail the step, or end the orchestration, at the first failure."""
    steps_outlast_store_outages: bool = Field(default=False, exclude_if=lambda outlasts: not outlasts)
    """Set by workflows started since every step's activity is tried again on durable timers (`OUTAGE_RETRIES`) when
    it fails for good with the store down, as the close is (`outlasts_store_outages`); histories from before fail the
    step at the first failure."""
    reads_record_first: bool = Field(default=False, exclude_if=lambda reads: not reads)
    """Set by workflows started since the first execution reads the workflow's record before its first step
    (`workflow_closed_before`): a workflow given up by its start (closed `start_failed`) whose orchestration the host
    started all the same ends as its record says, running nothing; histories from before start their first step."""

    @property
    def control_session(self) -> str:
        return control_session_id(self.run_id)


class MonitorState(_Payload):
    step_id: str
    iteration: int = 0
    deadline_at: datetime | None = None
    sleeping_until: datetime | None = None


class AwaitedChildren(_Payload):
    """An agent step waiting for a child run rewound on its own, carried across continue-as-new: the next execution
    looks at its children again at once (its step, attempt key, journal seq and child runs as they were)."""

    op: str
    step_id: str
    key: str
    seq: int
    iteration: int | None = None
    run_ids: list[str]
    failure: str | None = None
    cancelled: list[str] = Field(default_factory=list)
    looks: int = 0
    """The looks so far: the next wait's length (`REWOUND_CHILD_LOOKS`)."""


class WorkflowState(_Payload):
    """What the driver carries across continue-as-new: everything else is in the store."""

    pc: int = 0
    refs: dict[str, int] = Field(default_factory=dict)
    """step id -> seq of its latest journal entry."""
    next_position: int = 1  # position 0 of the control session holds nothing; entries start at 1
    monitor: MonitorState | None = None
    last_step: str | None = None
    steps_done: int = 0
    generation: int = 0
    signals: dict[str, int] = Field(default_factory=dict)
    """signal name -> index of the next signal of that name to consume (1 when absent): the queue positions."""
    attempts: dict[str, int] = Field(default_factory=dict)
    """step id -> how often a rewind sent the workflow back to it: a step's next attempt gets a key (its child
    runs, gates) of its own, `<step>.r<n>`, so it never meets the records of the attempt that failed."""
    awaiting: AwaitedChildren | None = None

    @model_serializer(mode="wrap")
    def _as_before_rewinds(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Written only once a rewind set it: histories in flight keep their exact continue-as-new inputs.
        data = handler(self)
        if not self.attempts:
            data.pop("attempts", None)
        if self.awaiting is None:
            data.pop("awaiting", None)
        return data


class WorkflowInput(_Payload):
    """The orchestration input (the workflow's input itself is in its run record)."""

    ref: WorkflowRef
    state: WorkflowState = Field(default_factory=WorkflowState)


class StepRequest(_Payload):
    """What a step activity needs: which step, which attempt (`key`), where to journal, what it may read."""

    ref: WorkflowRef
    step_id: str
    key: str
    seq: int
    refs: dict[str, int]
    at: datetime | None = None
    """The workflow's (durable) time when the step was scheduled: journal and decision timestamps use it."""

    @field_serializer("at")
    def _at_as_written(self, at: datetime | None, info: SerializationInfo) -> datetime | str | None:
        # Histories in flight: a plain step request always wrote `at` as `isoformat()` (`+00:00`), its subclasses as
        # pydantic does (`Z`). The orchestrator checks each input against the payload budget on every replay, so an
        # input's size must not move, not even by the five bytes between the two.
        if at is None or not info.mode_is_json() or type(self) is not StepRequest:
            return at
        return at.isoformat()


class ChildRunIds(_Payload):
    """The child runs of a step (to flag cancelled in the store)."""

    run_ids: list[str]


class NoResult(_Payload):
    """The output of an activity that only writes (`{}`)."""


class StartedRuns(_Payload):
    """The child runs a step created in the store, ready to start as `agent_run` sub-orchestrations."""

    runs: list[RunInput] = Field(default_factory=list)
    # Child runs the store closed in place of their start (`start_interrupted`, `agent_runs.child_runs`): never
    # started, recorded with the others, so the step fails with their error.
    closed: list[str] = Field(default_factory=list)
    error: str | None = None
    cancelled: bool = False
    ended: FinishResult | None = Field(default=None, exclude_if=lambda ended: ended is None)
    """The workflow's record was closed when the step was about to act (its start gave it up after the orchestration
    read it open, `workflow_closed_before`): the step did nothing, and the workflow ends as the record says."""

    @property
    def run_ids(self) -> list[str]:
        return [run.run.run_id for run in self.runs] + self.closed


class AgentRunsRecord(StepRequest):
    run_ids: list[str]
    failure: str | None = None  # the sub-orchestration task failed (the orchestration crashed)
    cancelled: list[str] = Field(default_factory=list, exclude_if=lambda cancelled: not cancelled)
    """The branches a failed branch had cancelled (fail-fast): ended `cancelled`, they are not the step's failure."""


class GateRequest(StepRequest):
    level: int = 0  # 0: the approver; 1: the escalation
    expires_at: datetime


class GateOpened(_Payload):
    approval_id: str
    expires_at: datetime
    ended: FinishResult | None = Field(default=None, exclude_if=lambda ended: ended is None)
    """The workflow's record was closed when the step was about to act (its start gave it up after the orchestration
    read it open, `workflow_closed_before`): the step did nothing, and the workflow ends as the record says."""


class GateRecord(StepRequest):
    approval_id: str
    level: int
    timed_out: bool = False


class GateExpiry(_Payload):
    """What the gate's approval is after its deadline: `expired`, or the decision that won the race."""

    status: ApprovalStatus


class SignalProbe(_Payload):
    ref: WorkflowRef
    name: str
    index: int


class SignalFound(_Payload):
    found: bool


class SignalRecord(StepRequest):
    name: str
    index: int | None = None  # None: the wait timed out


class DelayRecord(StepRequest):
    until: datetime


class StepResult(_Payload):
    """A finished step, as the driver sees it. `condition`: a branch's test or a monitor's `until`."""

    step_id: str
    status: Literal["ok", "failed", "cancelled", "running"]
    """`running`: not recorded yet - a child run rewound on its own still runs (the agent step looks again)."""
    error: str | None = None
    code: str | None = None
    """Why a step failed, stable (e.g. `activity_failed`, `payload_too_large`); None: the step's own failure."""
    journaled: bool = True
    condition: bool | None = None
    approved: bool | None = None
    cancel_requested: bool = False
    ended: FinishResult | None = Field(default=None, exclude_if=lambda ended: ended is None)
    """The workflow's record was closed when the step was about to act (its start gave it up after the orchestration
    read it open, `workflow_closed_before`): the step did nothing, and the workflow ends as the record says."""


class FinishRequest(_Payload):
    ref: WorkflowRef
    status: FinalStatus
    reason: str
    code: str | None = None
    failed_step: str | None = None
    refs: dict[str, int]
    last_step: str | None = None


class WorkflowClosed(_Payload):
    """What `workflow_finish` found: `ended` when the store closed the workflow otherwise than asked - its cancel was
    flagged (`rules.finish` closes a flagged run `cancelled`: the 202 the client had decides), or it had been closed
    before. Histories from before hold `{}` (it returned nothing): closed as asked."""

    ended: FinishResult | None = Field(default=None, exclude_if=lambda ended: ended is None)


class WorkflowOutcome(Resumable):
    """The orchestration output (the output itself is in the store). A workflow whose step failed carries the
    input that runs that step again (`resume`: what a rewind starts; steps before it are not run again)."""

    run_id: str
    status: FinalStatus
    reason: str
    code: str | None = None
    failed_step: str | None = None
    resume: WorkflowInput | None = None


class Waiting(_Payload):
    approval_id: str | None = None
    signal: str | None = None
    signal_index: int | None = None  # the queue position of the signal waited for
    until: datetime | None = None


class WorkflowProgress(_Payload):
    """The orchestration's custom status: what a poller needs besides the store."""

    status: WorkflowStatus
    active_step: str | None = None
    active_kind: str | None = None
    iteration: int | None = None
    child_runs: list[str] = Field(default_factory=list)
    waiting: Waiting | None = None
    steps_done: int = 0
    generation: int = 0
    reason: str | None = None
    failed_step: str | None = None
