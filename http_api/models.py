"""Request and response bodies of the HTTP API (pydantic; unknown fields are refused so typos surface as 422)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, field_validator

from agent_runtime.mcp.skips import SkippedServer
from agent_runtime.messages import Usage
from agent_runtime.spend import RunBudget
from http_api.access import Decidable, Editable, approval_rights
from http_api.identity import Principal
from http_api.reserved_ids import refuse_reserved
from session_store import ApprovalRecord, RunRecord

# Ids travel in URLs and become Cosmos ids/partition keys: keep them to a safe alphabet.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
Identifier = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
# A session id a client chooses: an id, and none of the app's own (http_api/reserved_ids.py).
ClientSessionId = Annotated[str, StringConstraints(pattern=ID_PATTERN), AfterValidator(refuse_reserved)]
MAX_WAIT_SECONDS = 60
MAX_APPROVAL_TIMEOUT_SECONDS = 30 * 24 * 3600
MAX_METADATA_ENTRIES = 16

RunStatus = Literal["queued", "in_progress", "requires_action", "completed", "failed", "cancelled"]
FINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class InputMessage(StrictModel):
    role: Literal["user", "assistant", "system"] = "user"
    content: Annotated[str, StringConstraints(min_length=1)]

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


MetadataValue = str | int | float | bool


def checked_run_input(value: str | list[InputMessage]) -> str | list[InputMessage]:
    """A run's input as every route that starts one takes it: not blank, and asking something (a user message)."""
    if isinstance(value, str) and not value.strip():
        raise ValueError("must not be blank")
    if isinstance(value, list) and not any(message.role == "user" for message in value):
        raise ValueError("must contain at least one user message")
    return value


class StartRunRequest(StrictModel):
    """`POST /api/agents/{agent}/runs`."""

    input: Annotated[str, StringConstraints(min_length=1)] | Annotated[list[InputMessage], Field(min_length=1)]
    session_id: ClientSessionId | None = None
    wait_seconds: Annotated[float, Field(ge=0, le=MAX_WAIT_SECONDS)] = 0
    approval_timeout_seconds: Annotated[int, Field(ge=1, le=MAX_APPROVAL_TIMEOUT_SECONDS)] | None = None
    metadata: dict[Annotated[str, StringConstraints(min_length=1, max_length=64)], MetadataValue] = Field(
        default_factory=dict, max_length=MAX_METADATA_ENTRIES
    )
    budget: RunBudget | None = Field(
        default=None, description="limits for this run; each may only be lower than the agent's (422 otherwise)"
    )
    if_busy: Literal["reject", "enqueue", "interrupt"] = Field(
        default="reject",
        description="the session has an active run: 409 (reject), start when it ends (enqueue, status queued), or "
        "cancel it and start when it has ended (interrupt)",
    )
    webhook: Annotated[str, StringConstraints(min_length=1, max_length=2048)] | None = Field(
        default=None, description="also send this run's events here (signed; its host must be in WEBHOOK_ALLOWED_HOSTS)"
    )

    @field_validator("input")
    @classmethod
    def _input_not_blank(cls, value: str | list[InputMessage]) -> str | list[InputMessage]:
        return checked_run_input(value)

    def input_messages(self) -> list[InputMessage]:
        return [InputMessage(content=self.input)] if isinstance(self.input, str) else list(self.input)


class ApprovalDecisionRequest(StrictModel):
    """`POST /api/runs/{run_id}/approvals/{approval_id}`."""

    decision: Literal["approve", "reject"]
    reason: Annotated[str, StringConstraints(max_length=2000)] | None = None
    arguments: dict[str, Any] | None = Field(
        default=None, description="Edited arguments (approve only); validated against the tool's schema."
    )

    @field_validator("arguments")
    @classmethod
    def _arguments_only_when_approving(cls, value: dict[str, Any] | None, info: Any) -> dict[str, Any] | None:
        if value is not None and info.data.get("decision") == "reject":
            raise ValueError("edited arguments are only accepted with decision 'approve'")
        return value


class PendingApproval(BaseModel):
    approval_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    expires_at: datetime | None
    escalated_to: str | None = Field(default=None, description="who the decision was escalated to, if it was")
    decidable: Decidable = False
    editable: Editable = False

    @classmethod
    def of(cls, record: ApprovalRecord, run: RunRecord, viewer: Principal, *, now: datetime) -> PendingApproval:
        """A pending approval of `run` as `viewer` (the run's owner: only they see a run's view) sees it."""
        rights = approval_rights(viewer, record, run, now=now)
        return cls.model_validate(record.model_dump(include=set(cls.model_fields) - set(rights._fields))
                                  | rights._asdict())


class RunUpdate(BaseModel):
    """One new thing since the client's cursor: a message of the run (text, tool calls, tool results, approvals)."""

    seq: int
    message: dict[str, Any]


class RunError(BaseModel):
    code: str
    message: str


class RunLinks(BaseModel):
    self: str
    cancel: str
    approvals: str
    session: str


class SkippedTool(BaseModel):
    """An MCP tool the run does not offer: its input schema is invalid or refused (`reason`, cut to 300 characters)."""

    server: str
    tool: str
    reason: str


class RunView(BaseModel):
    """The body of every run response (start, poll)."""

    run_id: str
    session_id: str
    agent: str
    status: RunStatus
    created_at: datetime | None = None
    updated_at: datetime | None = None
    updates: list[RunUpdate] = Field(default_factory=list)
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage, description="tokens so far; `cost` when MODEL_PRICES prices them")
    output: dict[str, Any] | None = None
    finish_reason: str | None = Field(
        default=None, description="why a completed run ended: `stop`, `budget_exceeded`, `max_iterations`, ..."
    )
    partial_output: str | None = Field(
        default=None, description="the text of the model answer streaming in right now (not yet an update)"
    )
    error: RunError | None = None
    rewinds: list[dict[str, Any]] = Field(
        default_factory=list, description="each rewind of the run: who, when, from which step (POST .../rewind)"
    )
    skipped_tools: list[SkippedTool] = Field(
        default_factory=list,
        description="MCP tools left out of the run when it listed them, for their input schema (the first 50)",
    )
    skipped_servers: list[SkippedServer] = Field(
        default_factory=list,
        description="optional MCP servers left out of the run: they could not be listed (`code` says why)",
    )
    continuation_token: str | None = None
    links: RunLinks
