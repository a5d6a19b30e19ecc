"""A run's cancel flag (`agent_runs.run_status.flag_cancel`), on both stores: written under the ETag of the run as
the request read it; a run changed since is read again, and flagged only while it is open and unflagged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from store_helpers import new_session, run

from agent_runs.run_status import flag_cancel
from session_store import SessionStore


async def test_a_second_cancel_from_a_stale_read_keeps_the_first_time(store: SessionStore) -> None:
    session_id = await new_session(store)
    read = await store.begin_run(run(session_id))
    first = datetime.now(UTC)
    await flag_cancel(store, read, first)
    await flag_cancel(store, read, first + timedelta(seconds=1))  # read before the first flag landed
    flagged = await store.get_run(read.run_id)
    assert flagged is not None and flagged.cancel_requested_at == first


async def test_a_run_changed_since_it_was_read_is_flagged_on_its_fresh_state(store: SessionStore) -> None:
    session_id = await new_session(store)
    read = await store.begin_run(run(session_id))
    await store.update_run(read.run_id, metadata={"changed": True})
    now = datetime.now(UTC)
    await flag_cancel(store, read, now)
    flagged = await store.get_run(read.run_id)
    assert flagged is not None and (flagged.cancel_requested_at, flagged.metadata) == (now, {"changed": True})


async def test_a_run_that_finished_since_it_was_read_is_not_flagged(store: SessionStore) -> None:
    session_id = await new_session(store)
    read = await store.begin_run(run(session_id))
    await store.finish_run(read.run_id, "completed", output={"text": "done"})
    await flag_cancel(store, read, datetime.now(UTC))
    finished = await store.get_run(read.run_id)
    assert finished is not None and (finished.status, finished.cancel_requested_at) == ("completed", None)
