"""What an event says (sans-IO): the Standard Webhooks body `{"type", "timestamp", "data"}` of every notification,
built from the store's records. Ids are deterministic, so a retried activity records the same event once and every
delivery attempt of it carries the same `webhook-id`."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from session_store import ApprovalRecord, RunRecord

EventType = Literal[
    "approval.requested",
    "approval.escalated",
    "approval.decided",
    "approval.expired",
    "run.completed",
    "run.failed",
    "run.cancelled",
    "workflow.gate_opened",
    "workflow.completed",
    "workflow.failed",
]
EVENT_TYPES: tuple[str, ...] = EventType.__args__  # type: ignore[attr-defined]
OPENING_TYPES = frozenset({"approval.requested", "approval.escalated", "workflow.gate_opened"})
# The last event of a run: its delivery orchestration ends once this is delivered.
FINAL_TYPES = frozenset({"run.completed", "run.failed", "run.cancelled", "workflow.completed", "workflow.failed"})


class Links(BaseModel):
    api: str
    run: str
    page: str | None = None


class NotificationEvent(BaseModel):
    """One event of one run, as recorded in the run's session (the outbox) before anything is sent."""

    id: str = Field(description="the `webhook-id`: the same on every attempt")
    type: EventType
    timestamp: datetime
    run_id: str
    data: dict[str, Any]

    @property
    def final(self) -> bool:
        return self.type in FINAL_TYPES

    def body(self) -> dict[str, Any]:
        """The Standard Webhooks payload."""
        return {"type": self.type, "timestamp": _iso(self.timestamp), "data": self.data}


def event_id(*parts: str) -> str:
    return "msg_" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def approval_transitions(record: ApprovalRecord) -> list[tuple[EventType, str, datetime | None]]:
    """Every event an approval's stored state implies, in order, each with its discriminator and time (recording all
    of them is idempotent: a transition whose notification was missed is recorded with the next one)."""
    opened: EventType = "workflow.gate_opened" if record.workflow_gate else "approval.requested"
    events: list[tuple[EventType, str, datetime | None]] = [(opened, "", record.created_at)]
    if record.escalated_to is not None:
        since = _iso(record.escalated_at) if record.escalated_at else ""
        events.append(("approval.escalated", since, record.escalated_at))
    if record.status in ("approved", "rejected"):
        events.append(("approval.decided", "", record.decided_at))
    elif record.status == "expired":
        events.append(("approval.expired", "", record.decided_at))
    return events


def approval_event(
    event_type: EventType,
    discriminator: str,
    at: datetime | None,
    record: ApprovalRecord,
    *,
    agent: str,
    base_url: str,
    page: str | None,
    include_arguments: bool,
) -> NotificationEvent:
    data: dict[str, Any] = {
        "approval_id": record.approval_id,
        "run_id": record.run_id,
        "session_id": record.session_id,
        "agent": agent,
        "tool": record.tool,
        "call_id": record.call_id,
        "status": record.status,
        "expires_at": _iso(record.expires_at) if record.expires_at else None,
        "approvers": list(record.approvers),
        "separation_of_duties": record.separation_of_duties,
        "escalated_to": record.escalated_to,
        "links": Links(
            api=f"{base_url}/api/runs/{record.run_id}/approvals/{record.approval_id}",
            run=f"{base_url}/api/runs/{record.run_id}",
            page=page,
        ).model_dump(),
    }
    if event_type == "approval.decided":
        data |= {"decision": record.status, "decided_by": record.decided_by, "decided_by_name": record.decided_by_name,
                 "decided_at": _iso(record.decided_at) if record.decided_at else None, "reason": record.reason}
    if include_arguments:
        data["arguments"] = record.arguments
    return NotificationEvent(
        id=event_id(record.run_id, event_type, record.approval_id, discriminator),
        type=event_type,
        timestamp=at or datetime.now(UTC),
        run_id=record.run_id,
        data=data,
    )


def run_event(run: RunRecord, *, base_url: str) -> NotificationEvent | None:
    """The run's final event, once its stored status is final (once per end: a rewind lets the run end again)."""
    if run.status not in ("completed", "failed", "cancelled"):
        return None
    prefix = "workflow" if run.kind == "workflow" else "run"
    cancelled_workflow = prefix == "workflow" and run.status == "cancelled"
    event_type = "workflow.failed" if cancelled_workflow else f"{prefix}.{run.status}"
    path = "workflows/runs" if run.kind == "workflow" else "runs"
    api = f"{base_url}/api/{path}/{run.run_id}"
    data: dict[str, Any] = {
        "run_id": run.run_id,
        "session_id": run.session_id,
        "agent": run.agent,
        "kind": run.kind,
        "status": run.status,
        "links": {"api": api, "run": api, "page": None},
    }
    if run.error:
        data["error"] = {"code": run.error.get("code"), "message": run.error.get("message")}
    # A rewound run ends again: each end is an event of its own (under one id it would be recorded once, sent once).
    again = [f"rewind:{len(run.rewinds)}"] if run.rewinds else []
    return NotificationEvent(
        id=event_id(run.run_id, event_type, *again),
        type=event_type,  # type: ignore[arg-type]
        timestamp=run.updated_at or datetime.now(UTC),
        run_id=run.run_id,
        data=data,
    )


def wanted(event_type: str, filters: list[str]) -> bool:
    """`WEBHOOK_EVENTS`: exact types or prefixes ending in `*` (`approval.*`); empty means every type."""
    if not filters:
        return True
    return any(event_type == f or (f.endswith("*") and event_type.startswith(f[:-1])) for f in filters)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
