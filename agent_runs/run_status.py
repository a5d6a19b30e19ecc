"""The run's status in the store while it runs (`in_progress` / `requires_action`), for the caller's run lists.

Polls read the live status from the orchestration; lists read the store, so the approval activities keep it current.
Best effort by design: a run that changed meanwhile (finished, cancel requested) keeps its own state, and a finished
run's status is never touched. Its cancel flag (`flag_cancel`) is written the same way, under the ETag read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from agent_runs.conversation_cache import ConversationCache
from session_store import CLIENT_CANCEL_REASON, ConflictError, RunRecord, SessionStore

FLAG_ROUNDS = 5  # reads of a run that keeps changing under a cancel's flag before giving up


async def mark(
    store: SessionStore,
    run_id: str,
    status: Literal["in_progress", "requires_action"],
    *,
    session_id: str | None = None,
    current: RunRecord | None = None,
) -> RunRecord | None:
    """`current`: the run as the caller read it in this step (no second read): the update is conditioned on its ETag,
    so a run that changed since keeps its newer state. Returns the run as written (None: nothing written)."""
    run = current or await store.get_run(run_id, session_id=session_id)
    if run is None or run.finished or run.status == status:
        return None
    try:
        return await store.update_run(run_id, if_match=run.etag, current=run, status=status)
    except ConflictError:
        return None  # the run changed under us (e.g. it finished): its newer state wins


async def mark_unless_pending(
    store: SessionStore, run_id: str, *, session_id: str | None = None, pending: bool | None = None,
    current: RunRecord | None = None,
) -> RunRecord | None:
    """After a decision or an expiry: back to `in_progress` once no approval of the run is pending (`pending`: the
    caller read the run's approvals in this step already; `current` as for `mark`)."""
    if pending is None:
        pending = bool(await store.list_approvals(run_id=run_id, session_id=session_id, status="pending"))
    if not pending:
        return await mark(store, run_id, "in_progress", session_id=session_id, current=current)
    return None


async def flag_cancel(
    store: SessionStore,
    run: RunRecord,
    now: datetime,
    *,
    reason: str = CLIENT_CANCEL_REASON,
    conversations: ConversationCache | None = None,
) -> RunRecord | None:
    """Flag `run`'s cancel (what its steps check), written under the ETag of `run` as the caller read it (no second
    read). A run changed since is read again: flagged unless it finished or another cancel flagged it meanwhile (the
    first request's time stays; a run that ended is not marked after the fact). Once flagged the run ends `cancelled`
    (`rules.finish`), with `reason` as its error's message (as its cancel event would). Returns the run as it ended
    when it finished before it could be flagged (the cancel came too late), else None. A flag written under the ETag
    it read is the only change since, so this process's cached conversation of the run stays valid
    (`ConversationCache.run_changed`: the run's closing step then reads no messages)."""
    current: RunRecord | None = run
    for _ in range(FLAG_ROUNDS):
        if current is not None and current.finished:
            return current
        if current is None or current.cancel_requested_at is not None:
            return None
        try:
            flagged = await store.update_run(
                run.run_id, if_match=current.etag, current=current, cancel_requested_at=now, cancel_reason=reason
            )
        except ConflictError:
            current = await store.get_run(run.run_id, session_id=run.session_id)
            continue
        if conversations is not None:
            conversations.run_changed(run.session_id, run.run_id, current.etag, flagged.etag)
        return None
    raise ConflictError(f"run {run.run_id!r} kept changing; its cancel was not flagged")
