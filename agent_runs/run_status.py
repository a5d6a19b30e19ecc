"""The run's status in the store while it runs (`in_progress` / `requires_action`), for the caller's run lists.

Polls read the live status from the orchestration; lists read the store, so the approval activities keep it current.
Best effort by design: a run that changed meanwhile (finished, cancel requested) keeps its own state, and a finished
run's status is never touched.
"""

from __future__ import annotations

from typing import Literal

from session_store import ConflictError, RunRecord, SessionStore


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
