"""Payloads between the API, the `agent_run` orchestrator and its activities (all small: see `budget.py`).

Activities take `*Input` models and return summaries from the loop's vocabulary (`ModelTurn`, `ToolOutcome`,
`ApprovalDecision`) or a `StepFailure`; conversation content stays in the session store. The orchestrator publishes a
`RunProgress` as its custom status, which is what pollers read to know how far the run has got.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from agent_runtime.escalation import Escalate
from agent_runtime.loop_types import (
    ApprovalDecision,
    CallModel,
    Finish,
    LoopCommand,
    LoopConfig,
    LoopState,
    ModelTurn,
    ToolCallRef,
    ToolInvocation,
)
from agent_runtime.messages import Usage
from agent_runtime.tool_policy import ToolPolicy
from notifications.contracts import NotificationFlags
from telemetry.trace_context import RunTrace

ORCHESTRATOR_NAME = "agent_run"
APPROVAL_EVENT = "approval"
CANCEL_EVENT = "cancel"
CANCELLED_CODE = "cancelled"

RunStatus = Literal["queued", "in_progress", "requires_action", "completed", "failed", "cancelled"]
TimeoutAction = Literal["reject", "fail"]


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunRef(_Payload):
    """Which run a payload belongs to; everything an activity needs to find its conversation."""

    run_id: str
    session_id: str
    agent: str
    ordinal: int = Field(ge=0, description="0 only while the run waits in the session's queue (no position yet)")
    trace: RunTrace | None = None
    """The run's trace (W3C context of the start request + start time): every activity parents its spans under it."""
    tools: ToolPolicy | None = Field(default=None, exclude_if=lambda tools: tools is None)
    """The run's narrowing of its agent's tools (`RunOverrides.tools`): every activity works with the narrowed agent.
    Written only when set, so the payloads of other runs (and histories in flight) keep their exact bytes."""


class RunInput(_Payload, NotificationFlags):
    """The orchestration input. A fresh run has no `loop_state`; a continued-as-new one carries the loop's state and
    the command to execute first, so the new execution picks up exactly where the old one stopped."""

    run: RunRef
    loop_config: LoopConfig
    next_position: int = Field(ge=0)
    approval_timeout_seconds: float = Field(gt=0)
    on_approval_timeout: TimeoutAction = "reject"
    escalation: Escalate | None = None
    loop_state: LoopState | None = None
    pending_command: Annotated[LoopCommand, Field(discriminator="kind")] | None = None
    generation: int = 0
    discover_tools: bool = False
    """The agent has MCP servers: the first execution lists their tools (`discover_tools`) before anything else."""
    run_middleware: bool = False
    """The agent has run middleware: `run_middleware_before` runs first, `finish_run` post-processes."""
    cancel_grace_seconds: float = Field(default=30, ge=0)
    """How long a cancel waits for the step in flight before abandoning it (the run ends `cancelled` anyway)."""
    queued: bool = Field(default=False, description="wait for the session first (if_busy=enqueue / interrupt)")
    ring_workflow: str | None = Field(default=None, exclude_if=lambda workflow: workflow is None)
    """The workflow run whose fail-fast parallel step started this run: the run's failure rings it
    (`ring_workflow`), so the step stops waiting for the other branches."""
    steps_wait_out_outages: bool = Field(default=False, exclude_if=lambda waits: not waits)
    """Set by runs started since a step whose activity failed for good with the store down is scheduled again after
    durable waits (`orchestrators.agent_run._step`): a history from before failed the run there (its close followed
    the failure, not a timer), so it replays as it ran."""


class StepFailure(_Payload):
    """A step that failed for good (non-retryable model error, unknown agent...): the run ends `failed` with it. Or
    one that found the run's cancel request in the store (`code="cancelled"`): the run ends `cancelled`."""

    kind: Literal["step_failure"] = "step_failure"
    code: str
    message: str

    @classmethod
    def cancelled(cls) -> StepFailure:
        return cls(code=CANCELLED_CODE, message="the run was cancelled")

    @property
    def is_cancel(self) -> bool:
        return self.code == CANCELLED_CODE


class ToolsDiscovered(_Payload):
    """`discover_tools`: the run's MCP tools are recorded (`tools`: how many), bar optional servers that could not be
    listed and tools left out for their input schema (`skipped_tools`: how many; the run's record names them). No
    `kind`: histories hold it as it always was; `extra="forbid"` tells it from a `StepFailure`."""

    tools: int
    skipped_servers: list[str] = Field(default_factory=list)
    skipped_tools: int = 0


ToolDiscoveryResult = ToolsDiscovered | StepFailure


class ToolCallInput(_Payload):
    run: RunRef
    invocation: ToolInvocation
    seq: int


class ApprovalRequestsInput(_Payload):
    run: RunRef
    calls: list[ToolCallRef]
    first_seq: int
    expires_at: datetime


class ApprovalsRecorded(_Payload):
    """`record_approvals`: the requests are stored (the conversation, the store) under these approval ids."""

    approval_ids: list[str] = Field(default_factory=list)


class DecisionsInput(_Payload):
    """Apply the decisions stored for the run's pending approvals (the API stores a decision, then rings the
    approval's doorbell). Every pending approval has its own reserved seq, `first_seq + its index in approval_ids`, so
    a retried activity rewrites in place whatever it finds decided. `rung`: the approvals whose event arrived; their
    decision must be in the store (the others are read too, which delivers a decision whose event was lost)."""

    run: RunRef
    approval_ids: list[str]
    rung: list[str] = Field(default_factory=list)
    first_seq: int


class DecisionsResult(_Payload):
    """`decided`: the decisions applied, in `approval_ids` order; `unconfirmed`: rung approvals the store still shows
    pending (an event no decision stands behind); `more`: decisions left out to keep this result in budget;
    `cancelled`: the reason of the run's cancel, flagged before its decisions were applied (none was: the run ends
    `cancelled` without running what they approved)."""

    decided: list[ApprovalDecision] = Field(default_factory=list)
    unconfirmed: list[str] = Field(default_factory=list)
    more: bool = False
    cancelled: str | None = None


class ExpireApprovalsInput(_Payload):
    """The approval timer fired: expire, in the store, what is still pending there (approval i of `approval_ids`
    writes its expiry at `first_seq + i`). A decision that won the race in the store is not expired: the run applies
    it like any other decision, so the store and the run never disagree."""

    run: RunRef
    approval_ids: list[str]
    first_seq: int


class ExpireApprovalsResult(_Payload):
    expired: list[str] = Field(default_factory=list)


class EscalateApprovalsInput(_Payload):
    """The first approval deadline passed and the agent escalates: hand what is still pending in the store to `to`
    until `expires_at` (a decision that won the race in the store is applied instead, as after an expiry)."""

    run: RunRef
    approval_ids: list[str]
    to: str
    expires_at: datetime


class EscalateApprovalsResult(_Payload):
    escalated: list[str] = Field(default_factory=list)


class MiddlewareBeforeInput(_Payload):
    """Run the run middleware's pre-processing; `first_seq`/`slots`: where added input or an early answer go."""

    run: RunRef
    first_seq: int
    slots: int


class MiddlewareBeforeResult(_Payload):
    """`proceed`: the chain reached the run. Otherwise the chain ended it with `status`/`reason`."""

    proceed: bool
    status: Literal["completed", "failed", "cancelled"] = "completed"
    reason: str = ""


RunMiddlewarePhase = Literal["none", "after", "ended"]


class FinishInput(_Payload):
    run: RunRef
    finish: Finish
    first_seq: int
    usage: Usage = Field(default_factory=Usage)
    run_middleware: RunMiddlewarePhase = "none"
    """`after`: post-process with the run middleware; `ended`: the middleware's pre-processing ended the run."""
    approvals_asked: bool = True
    """False: this execution never asked for an approval (and earlier ones settled all theirs before continuing as
    new), so none can be pending and `finish_run` does not look. True (also an input scheduled by older code): look."""


class FinishResult(_Payload):
    """How the run really ended: structured output validation and run middleware may change the loop's verdict."""

    status: Literal["completed", "failed", "cancelled"]
    reason: str


class CloseIfFinal(_Payload):
    """What a model call needs to close the run itself when its answer ends the loop (one activity less per run):
    the loop as it stood when the call was made, and what `finish_run` would have been given. Only for a run without
    run middleware to post-process its result: see `agent_runs.finishing.close_if_final`."""

    loop_state: LoopState
    first_seq: int
    """The finish block: the positions right after the call's own block, as `RunDriver.finish_input` allocates."""
    approvals_asked: bool = True


class ModelCallInput(_Payload):
    run: RunRef
    command: CallModel
    first_seq: int
    close: CloseIfFinal | None = None
    """How to close the run should the answer end the loop (`ClosedModelTurn`); None for a run with run middleware,
    and in histories from before."""


class ClosedModelTurn(_Payload):
    """`call_model` answered and, its answer ending the loop, closed the run as `finish_run` would have (`finished`:
    how). The orchestrator's loop reaches the same `Finish` from `turn`. A retried attempt that found the run closed
    by the attempt before it has no turn: it says how the run was closed (`finish`, from the run's record)."""

    kind: Literal["closed_model_turn"] = "closed_model_turn"
    turn: ModelTurn | None = None
    finished: FinishResult
    finish: Finish | None = None


ModelCallResult = Annotated[ModelTurn | StepFailure | ClosedModelTurn, Field(discriminator="kind")]


class ResumePoint(_Payload):
    """Where a failed run can go on from (`POST /api/runs/{id}/rewind`): the step that failed and the orchestration
    input that executes it again, with the loop's state from just before it (so completed model and tool calls are
    not made again) and positions after everything the failed run wrote (so continuation tokens stay valid)."""

    step: Literal["call_model", "invoke_tool", "discover_tools", "run_middleware_before"]
    iteration: int = Field(ge=0)
    input: RunInput


class Resumable(_Payload):
    """An orchestration output that may carry a `resume` point: written only when set, so the outputs of runs with
    nothing to resume stay exactly as they always were."""

    resume: Any = None

    @model_serializer(mode="wrap")
    def _resume_only_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        if self.resume is None:
            data.pop("resume", None)
        return data


class RunOutcome(Resumable):
    """The orchestration output: the run's final status (its answer is in the store, not in history). A run that
    failed in a step it can repeat carries its `resume` point (read by rewind from the orchestration's output, so
    the run record and every poll stay small)."""

    run_id: str
    status: Literal["completed", "failed", "cancelled"]
    reason: str
    resume: ResumePoint | None = None


def approval_event_name(approval_id: str) -> str:
    """The external event announcing one approval's decision. Every approval has its own name, never shared: the
    Python SDK keeps one deferred event per name (a second overwrites the first, and it completes every later waiter
    of that name), so a name shared by several decisions loses or replays them (docs/durable-protocol.md §5)."""
    return f"{APPROVAL_EVENT}:{approval_id}"


class ApprovalEvent(_Payload):
    """Payload of an approval's event (`approval_event_name`): a doorbell naming the approval. The decision itself is
    read from the store, where the API wrote it before raising the event."""

    approval_id: str


class CancelEvent(_Payload):
    reason: str | None = None


class RunProgress(_Payload):
    """The orchestration's custom status: what a poller needs besides the store."""

    status: RunStatus
    iteration: int = 0
    visible_seq: int
    pending_approvals: list[str] = Field(default_factory=list)
    approvals_expire_at: datetime | None = None
    usage: Usage = Field(default_factory=Usage)
    reason: str | None = None
    model_call_seq: int | None = Field(
        default=None, description="first seq of the model call in flight: where its streamed draft is stored"
    )


class TurnInput(_Payload):
    """`take_turn`: is it this queued run's turn? (`polls`: how often it asked, for the activity's logs.)"""

    run: RunRef


class TurnResult(_Payload):
    """`ordinal` once the run holds the session (its input is then written); `cancelled` if it was cancelled while
    it waited (the run is then closed); neither: keep waiting."""

    ordinal: int | None = None
    input_count: int = 0
    cancelled: bool = False
