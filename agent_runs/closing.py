"""Closing a run in the store: what `finish_run` does at the end of every run, and the same end state for a run
whose orchestration died without getting there (terminated, crashed), so its session is always ready for the next
run: every tool call answered (a model refuses a conversation with a call that has no result), no approval left
pending, the session released.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from agent_runs.client_errors import crash_error
from agent_runs.sequence import run_seq_range
from agent_runs.store_log import StoreConversationLog, load_session_records
from agent_runs.stored_usage import stored_run_usage
from agent_runtime.loop_types import Finish, RunStatus
from agent_runtime.messages import Message, Usage, unanswered_function_calls
from agent_runtime.steps import close_unresolved_calls_step
from session_store import AlreadyDecidedError, RunRecord, SessionStore


async def expire_pending_approvals(
    store: SessionStore, run_id: str, status: str, *, what: str = "run", session_id: str | None = None
) -> None:
    """Expire the undecided approvals of the run (or workflow run: `what`) that ended: nobody can decide them any
    more. (`session_id`: the run's, when the caller knows it.)"""
    for pending in await store.list_approvals(run_id=run_id, session_id=session_id, status="pending"):
        try:
            await store.decide_approval(
                pending.approval_id, "expired", reason=f"The {what} ended ({status}).", decided_at=datetime.now(UTC),
                current=pending,
            )
        except AlreadyDecidedError:
            continue  # decided in the meantime: that decision stands in the audit trail


async def close_abandoned_run(
    store: SessionStore, run: RunRecord, status: RunStatus, error: dict[str, Any]
) -> RunRecord:
    """Close a run whose orchestration is gone. Its calls without results get an error result written after the
    run's last message (nothing else writes to the run any more); safe to repeat (deterministic message ids). Its
    usage, which only its loop counted, is what the store holds of it (`stored_run_usage`), unless the record holds
    more: a rewound run kept its failed close's, which the stored answers hold too, with the calls made since."""
    first, last = run_seq_range(run.ordinal)
    session_records = await load_session_records(store, run.session_id)
    own = [r for r in session_records if first <= r.seq <= last]
    stored, recorded = stored_run_usage(run, own), Usage.model_validate(run.usage)
    usage = stored.model_dump(mode="json") if stored.total_tokens > recorded.total_tokens else None
    unanswered = unanswered_function_calls([Message.model_validate(r.payload) for r in session_records])
    if unanswered:
        next_seq = max((r.seq for r in own), default=first - 1) + 1
        log = StoreConversationLog(store, run.session_id, run.run_id, first_seq=next_seq, slots=len(unanswered))
        await close_unresolved_calls_step(log, run.run_id, Finish(status=status, reason=str(error.get("code"))))
    await expire_pending_approvals(store, run.run_id, status)
    return await store.finish_run(run.run_id, status, error=error, usage=usage)


# An orchestration's runtime status that ends it without its run closed (crash, terminate), and the run's end then.
CRASHED: dict[str, Literal["failed", "cancelled"]] = {
    "Failed": "failed",
    "Terminated": "cancelled",
    "Canceled": "cancelled",
}


async def close_if_crashed(store: SessionStore, run: RunRecord, runtime_status: str | None, output: Any) -> RunRecord:
    """A run whose orchestration ended without closing it (`runtime_status`: its orchestration's, `output` its
    failure text) is closed now, as `finish_run` would have: its calls answered, its approvals expired, its session
    freed. Any other run is returned as it is."""
    if run.finished or runtime_status not in CRASHED:
        return run
    status = CRASHED[runtime_status]
    code = "run_crashed" if status == "failed" else "run_terminated"
    detail = str(output or "the orchestration ended without finishing the run")
    return await close_abandoned_run(store, run, status, crash_error(code, detail, run.run_id))
