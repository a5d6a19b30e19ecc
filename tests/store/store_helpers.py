"""Small builders shared by the store contract tests."""

from __future__ import annotations

import uuid
from typing import Any

from session_store import ApprovalRecord, MessageRecord, RunRecord, SessionStore


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def message(session_id: str, seq: int, text: str = "", *, run_id: str | None = None, **payload: Any) -> MessageRecord:
    return MessageRecord(
        session_id=session_id,
        message_id=f"{session_id}-m{seq}",
        seq=seq,
        run_id=run_id,
        role="user" if seq % 2 == 0 else "assistant",
        payload={"content": text or f"message {seq}", **payload},
    )


def run(session_id: str, run_id: str | None = None, agent: str = "assistant") -> RunRecord:
    return RunRecord(run_id=run_id or new_id("run"), session_id=session_id, agent=agent, status="in_progress")


def approval(session_id: str, run_id: str, call: str = "call-1") -> ApprovalRecord:
    return ApprovalRecord(
        approval_id=f"{run_id}-{call}",
        run_id=run_id,
        session_id=session_id,
        call_id=call,
        tool="send_email",
        arguments={"to": "bob@example.com", "subject": "hi", "body": "hello"},
    )


async def new_session(store: SessionStore, agent: str = "assistant") -> str:
    session_id = new_id("s")
    await store.create_session(session_id, agent)
    return session_id
