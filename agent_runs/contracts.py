"""Payloads between the API, the `agent_run` orchestrator and its activities (all small: see `budget.py`).

Activities take `*Input` models and return summaries from the loop's vocabulary (`ModelTurn`, `ToolOutcome`,
`ApprovalDecision`) or a `StepFailure`; conversation content stays in the session store. The orchestrator publishes a
`RunProgress` as its custom status, which is what pollers read to know how far the run has got.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

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


class RunInput(_Payload):
    """The orchestration input. A fresh run has no `loop_state`; a continued-as-new one carries the loop's state and
    the command to execute first, so the new execution picks up exactly where the old one stopped."""

    run: RunRef
    loop_config: LoopConfig
    next_position: int = Field(ge=0)
    approval_timeout_seconds: float = Field(gt=0)
    on_approval_timeout: TimeoutAction = "reject"
    loop_state: LoopState | None = None
    pending_command: Annotated[LoopCommand, Field(discriminator="kind")] | None = None
    generation: int = 0
    queued: bool = Field(default=False, description="wait for the session first (if_busy=enqueue / interrupt)")


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


class ModelCallInput(_Payload):
    run: RunRef
    command: CallModel
    first_seq: int


ModelCallResult = Annotated[ModelTurn | StepFailure, Field(discriminator="kind")]


class ToolCallInput(_Payload):
    run: RunRef
    invocation: ToolInvocation
    seq: int


class ApprovalRequestsInput(_Payload):
    run: RunRef
    calls: list[ToolCallRef]
    first_seq: int
    expires_at: datetime


class DecisionInput(_Payload):
    """Apply the decision stored for `approval_id` (the API stored it; the event only says which one)."""

    run: RunRef
    approval_id: str
    seq: int


class ExpireApprovalsInput(_Payload):
    """The approval timer fired: expire what is still pending. A decision that won the race in the store is
    returned as a decision instead, so the store and the run never disagree."""

    run: RunRef
    approval_ids: list[str]
    first_seq: int


class ExpireApprovalsResult(_Payload):
    decided: list[ApprovalDecision] = Field(default_factory=list)
    expired: list[str] = Field(default_factory=list)


class FinishInput(_Payload):
    run: RunRef
    finish: Finish
    first_seq: int
    usage: Usage = Field(default_factory=Usage)


class RunOutcome(_Payload):
    """The orchestration output: the run's final status (its answer is in the store, not in history)."""

    run_id: str
    status: Literal["completed", "failed", "cancelled"]
    reason: str


class ApprovalEvent(_Payload):
    """Payload of the `approval` external event."""

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
