"""The run's status in the store while it runs (`in_progress` / `requires_action`), for the caller's run lists.

Polls read the live status from the orchestration; lists read the store, so the approval activities keep it current.
Best effort by design: a run that changed meanwhile (finished, cancel requested) keeps its own state, and a finished
run's status is never touched.
"""

from __future__ import annotations

from typing import Literal

from session_store import ConflictError, SessionStore


async def mark(store: SessionStore, run_id: str, status: Literal["in_progress", "requires_action"]) -> None:
    run = await store.get_run(run_id)
    if run is None or run.finished or run.status == status:
        return
    try:
        await store.update_run(run_id, if_match=run.etag, status=status)
    except ConflictError:
        return  # the run changed under us (e.g. it finished): its newer state wins


async def mark_unless_pending(store: SessionStore, run_id: str) -> None:
    """After a decision or an expiry: back to `in_progress` once no approval of the run is pending."""
    if not await store.list_approvals(run_id=run_id, status="pending"):
        await mark(store, run_id, "in_progress")
