"""Pydantic records exchanged with a ``SessionStore``.

Store-managed fields (``created_at``/``updated_at`` when left ``None``, ``etag``, a run's ``ordinal``) are filled in
by the store; every record a store returns has them set. Message payloads, run outputs, tool arguments and effect
payloads are opaque JSON objects: the store never interprets them, so it has no dependency on the agent runtime.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints

# Ids become Cosmos item ids: 1-255 characters, none of the four characters Cosmos forbids in ids.
StoreId = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^/\\?#]+$")]
JsonObject = dict[str, Any]

QueuePosition = Literal["back", "front"]
RunStatus = Literal["queued", "in_progress", "requires_action", "completed", "failed", "cancelled"]
TERMINAL_RUN_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
# The one terminal status a request changes again: a rewind reopens a failed run (`rules.reopen`), nothing else.
REOPENABLE_RUN_STATUS = "failed"
# A run's cancel, once flagged (`cancel_requested_at`), is how the run ends, whatever its step in flight would have
# ended it with (`rules.finish`); the reason of the API's cancel (its error's message, as its cancel event's).
CLIENT_CANCEL_REASON = "cancelled by the client"
WORKFLOW_CANCEL_REASON = "the workflow was cancelled"  # a workflow's child runs, when the workflow is cancelled
ApprovalStatus = Literal["pending", "approved", "rejected", "expired"]
DecidedApprovalStatus = Literal["approved", "rejected", "expired"]
# A workflow's approval gate is an approval record of the workflow run whose tool is this prefix + the step id (no
# agent tool is named so: tool names are letters, digits, `_` and `-`).
WORKFLOW_GATE_TOOL_PREFIX = "workflow_gate:"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SessionRecord(_Record):
    session_id: StoreId
    agent: str
    created_at: AwareDatetime | None = None
    updated_at: AwareDatetime | None = None
    metadata: JsonObject = Field(default_factory=dict)
    active_run_id: StoreId | None = None
    run_count: int = Field(default=0, ge=0)
    queued_run_ids: list[StoreId] = Field(
        default_factory=list, description="runs waiting for the session, in the order they will get it"
    )
    owner_id: str | None = Field(default=None, description="the principal that created the session")
    owner_name: str | None = None
    forked_from: JsonObject | None = Field(
        default=None,
        description="the session and run this session was forked from (`session_id`, `run_id`; `response_id`: a "
        "Responses conversation branched after that response, the copy holds the run too)",
    )
    etag: str | None = None


class MessageRecord(_Record):
    session_id: StoreId
    message_id: StoreId
    seq: int = Field(ge=0, description="caller-assigned, unique per session; defines the order")
    run_id: StoreId | None = None
    role: str
    payload: JsonObject
    created_at: AwareDatetime | None = None


class RunRecord(_Record):
    run_id: StoreId
    session_id: StoreId
    agent: str = Field(description="the agent's name, or the workflow's when kind is 'workflow'")
    kind: Literal["agent", "workflow"] = "agent"
    status: RunStatus = "queued"
    ordinal: int = Field(
        default=0, ge=0,
        description="1-based position among the session's runs; set by begin_run (a queued run: by take_turn)",
    )
    instance_id: str | None = None
    created_at: AwareDatetime | None = None
    updated_at: AwareDatetime | None = None
    input_seq: int | None = None
    cancel_requested_at: AwareDatetime | None = Field(
        default=None, description="set by a cancel request; activities check it so a cancel is never lost"
    )
    cancel_reason: str | None = Field(
        default=None, description="the flagged cancel's reason: the message of the run's error when it ends by the flag"
    )
    output: JsonObject | None = None
    error: JsonObject | None = None
    usage: JsonObject = Field(default_factory=dict)
    failed_call_usage: JsonObject = Field(
        default_factory=dict,
        description="by model call iteration: what the provider reported for attempts that failed (billed all the "
        "same; the usage's fields, and `attempts`: the ids of the attempts in it); the attempt that answers counts "
        "it, or the run's close when none does. Written only when such an attempt fails",
    )
    metadata: JsonObject = Field(default_factory=dict)
    overrides: JsonObject = Field(
        default_factory=dict, description="per-run changes to the agent (extra instructions, output format)"
    )
    discovered_tools: list[JsonObject] | None = Field(
        default=None,
        description="the tools discovered for the run when it started (MCP): written once by record_run_tools",
    )
    skipped_tools: list[JsonObject] = Field(
        default_factory=list,
        description="MCP tools left out of the run for their input schema (`server`, `tool`, `reason`): written with "
        "discovered_tools",
    )
    skipped_servers: list[JsonObject] = Field(
        default_factory=list,
        description="optional MCP servers left out of the run, they could not be listed (`server`, `code`, "
        "`message`): written with discovered_tools",
    )
    owner_id: str | None = Field(default=None, description="the principal that started the run")
    owner_name: str | None = None
    branched_from: str | None = Field(
        default=None,
        description="the first run of a Responses branch: the response it continues (its `previous_response_id`, "
        "which its session's `forked_from` names too), so that reading the response needs no read of the session",
    )
    rewinds: list[JsonObject] = Field(
        default_factory=list, description="each rewind of the failed run: `rewind_id`, who, when, from which step"
    )
    etag: str | None = None

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL_RUN_STATUSES

    @property
    def flagged_cancel_error(self) -> dict[str, str] | None:
        """The error the run ends with because its cancel was flagged (`rules.finish`); None while it is not."""
        if self.cancel_requested_at is None:
            return None
        return {"code": "cancelled", "message": self.cancel_reason or CLIENT_CANCEL_REASON}


# Fields ``update_run`` may change; identity, ordering and store-managed fields are not among them.
RUN_UPDATABLE_FIELDS: frozenset[str] = frozenset(
    {
        "status", "instance_id", "input_seq", "cancel_requested_at", "cancel_reason", "output", "error", "usage",
        "failed_call_usage", "metadata",
    }
)


class ApprovalRecord(_Record):
    approval_id: StoreId
    run_id: StoreId
    session_id: StoreId
    call_id: str
    tool: str
    arguments: JsonObject = Field(default_factory=dict)
    status: ApprovalStatus = "pending"
    created_at: AwareDatetime | None = None
    expires_at: AwareDatetime | None = None
    decided_at: AwareDatetime | None = None
    decided_by: str | None = Field(default=None, description="the deciding principal's id")
    decided_by_name: str | None = None
    reason: str | None = None
    edited_arguments: JsonObject | None = None
    escalated_to: str | None = None
    escalated_at: AwareDatetime | None = None
    owner_id: str | None = Field(default=None, description="the run's owner (who 'owner' in approvers means)")
    approvers: list[str] = Field(default_factory=lambda: ["owner"], description="'owner', 'role:<role>', ids")
    separation_of_duties: bool = False
    decider_keys: list[str] = Field(
        default_factory=list, description="'principal:<id>' / 'role:<role>' keys the inbox query matches"
    )
    etag: str | None = None

    @property
    def workflow_gate(self) -> bool:
        """A workflow's sign-off gate rather than an agent's tool call."""
        return self.tool.startswith(WORKFLOW_GATE_TOOL_PREFIX)


class EffectRecord(_Record):
    """One entry of the side-effect ledger: ``key`` is the tool's idempotency key (unique per session)."""

    session_id: StoreId
    key: StoreId
    kind: str
    payload: JsonObject = Field(default_factory=dict)
    created_at: AwareDatetime | None = None


class SignalRecord(_Record):
    """One signal sent to a workflow run, kept in its session: ``index`` numbers the signals of one ``name`` from 1,
    in the order the store accepted them (allocated atomically: no gap, no duplicate)."""

    session_id: StoreId
    name: str = Field(min_length=1, max_length=128)
    index: int = Field(ge=1)
    signal_id: StoreId
    payload: Any = None
    created_at: AwareDatetime | None = None


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of results; pass ``continuation`` back to get the next page (``None`` means there is no more)."""

    items: list[T]
    continuation: str | None = None


def stamp(created_at: datetime | None, now: datetime) -> datetime:
    """The creation time to store: the caller's if given, else the store clock's."""
    return created_at if created_at is not None else now
