"""Request and response bodies of the workflow routes (pydantic; unknown request fields are refused)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints

from http_api.models import MAX_WAIT_SECONDS, ClientSessionId, PendingApproval, StrictModel

WorkflowRunStatus = Literal[
    "queued", "in_progress", "requires_action", "waiting", "cancelling", "completed", "failed", "cancelled"
]
FINAL_WORKFLOW_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


class StartWorkflowRequest(StrictModel):
    """`POST /api/workflows/{name}/runs`."""

    input: dict[str, Any] = Field(default_factory=dict)
    session_id: ClientSessionId | None = Field(
        default=None, description="The conversation the workflow continues (workflows with a session agent)."
    )
    wait_seconds: Annotated[float, Field(ge=0, le=MAX_WAIT_SECONDS)] = 0
    webhook: Annotated[str, StringConstraints(min_length=1, max_length=2048)] | None = Field(
        default=None, description="also send this run's events here (signed; its host must be in WEBHOOK_ALLOWED_HOSTS)"
    )


class SignalRequest(StrictModel):
    """`POST /api/workflows/runs/{run_id}/signals/{name}`."""

    payload: Any = None


class StepSummary(BaseModel):
    id: str
    kind: str
    title: str = ""


class WorkflowSummary(BaseModel):
    name: str
    description: str
    input_schema: dict[str, Any]
    session_agent: str | None
    signals: list[str]
    steps: list[StepSummary]


class StepEntry(BaseModel):
    """One finished step (an entry of the workflow's journal): references to its child runs and its output."""

    seq: int
    step: str
    kind: str
    status: str
    output: Any = None
    error: str | None = None
    run_ids: list[str] = Field(default_factory=list)
    run_links: list[str] = Field(default_factory=list)
    finished_at: datetime | None = None


class ActiveStep(BaseModel):
    id: str
    kind: str | None = None
    iteration: int | None = None
    child_runs: list[str] = Field(default_factory=list)
    child_run_links: list[str] = Field(default_factory=list)
    waiting_for_approval: str | None = None
    waiting_for_signal: str | None = None
    waiting_until: datetime | None = None


class WorkflowError(BaseModel):
    code: str
    message: str
    step: str | None = None


class WorkflowLinks(BaseModel):
    self: str
    cancel: str
    approvals: str
    signals: str


class WorkflowRunView(BaseModel):
    run_id: str
    workflow: str
    status: WorkflowRunStatus
    session_id: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    active_step: ActiveStep | None = None
    steps: list[StepEntry] = Field(default_factory=list)
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    pending_signals: list[str] = Field(default_factory=list)
    output: dict[str, Any] | None = None
    error: WorkflowError | None = None
    continuation_token: str | None = None
    links: WorkflowLinks
