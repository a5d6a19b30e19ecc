"""`close_unwritten_start`: a start whose `begin_run` failed closes its run in the run's place unless the run is
there, so that a write of it still on its way (slower than its error) cannot land afterwards as a run nobody starts
or closes. Both stores; on Cosmos, a claim of the session that landed without its run is given back."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from store_helpers import new_id, new_session, run

from session_store import SessionStore
from session_store.rules import UNWRITTEN_START_KEPT, is_unwritten_start


async def test_a_start_closed_after_its_write_failed_cannot_land_later(store: SessionStore) -> None:
    """The failed `begin_run` wrote nothing (yet): the start is closed in its place; the same `begin_run` landing
    afterwards (a slow write, a client's retry) finds that record and claims nothing, so the session stays free."""
    session_id = await new_session(store)
    planned = run(session_id, new_id("late"))
    closed, written_now = await store.close_unwritten_start(planned)
    assert written_now and is_unwritten_start(closed) and closed.finished
    assert await store.close_unwritten_start(planned) == (closed, False)  # repeated: the same record, not written

    late = await store.begin_run(planned)
    assert is_unwritten_start(late), late
    session = await store.get_session(session_id)
    assert session is not None and (session.active_run_id, session.run_count) == (None, 0)
    nxt = await store.begin_run(run(session_id, new_id("next")))
    assert (nxt.status, nxt.ordinal) == ("in_progress", 1)


async def test_a_start_whose_run_was_written_is_not_closed(store: SessionStore) -> None:
    session_id = await new_session(store)
    written = await store.begin_run(run(session_id, new_id("written")))
    found, written_now = await store.close_unwritten_start(written)
    assert not written_now and (found.run_id, found.status, found.ordinal) == (written.run_id, "in_progress", 1)
    session = await store.get_session(session_id)
    assert session is not None and session.active_run_id == written.run_id


@pytest.mark.cosmos
async def test_cosmos_a_claim_that_landed_without_its_run_is_given_back_and_the_late_run_refused(
    harness: Any, store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cosmos writes the claim and the run apart: the claim landed, the run's write failed (and is still on its
    way). Closing the start gives the session back at once (no 60 s wait for the dead-start repair) and the run's
    late write is refused (create-if-absent), so the session has no holder that nobody will close."""
    if harness.backend != "cosmos":
        pytest.skip("a Cosmos store's two writes")
    session_id = await new_session(store)
    planned = run(session_id, new_id("slow"))
    runs = store._db._c["runs"]  # type: ignore[attr-defined]
    create_item = runs.create_item
    on_its_way: list[dict[str, Any]] = []

    async def slow(body: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if body["id"] == planned.run_id and body["status"] != "failed":
            on_its_way.append(body)
            raise ConnectionError("timed out; the write may still land")
        return await create_item(body, *args, **kwargs)

    monkeypatch.setattr(runs, "create_item", slow)
    with pytest.raises(Exception, match="timed out"):
        await store.begin_run(planned)
    held = await store.get_session(session_id)
    assert held is not None and held.active_run_id == planned.run_id  # the claim landed

    closed, written_now = await store.close_unwritten_start(planned)
    assert written_now and is_unwritten_start(closed)
    session = await store.get_session(session_id)
    assert session is not None and (session.active_run_id, session.run_count) == (None, 0)

    monkeypatch.undo()
    portal, containers = store._portal, store._db  # type: ignore[attr-defined]
    assert await portal.call(containers.create("runs", on_its_way[0])) is None  # the write on its way: refused
    after = await store.get_run(planned.run_id)
    assert after is not None and is_unwritten_start(after)
    nxt = await store.begin_run(run(session_id, new_id("next")))
    assert (nxt.status, nxt.ordinal) == ("in_progress", 1)


async def test_a_closed_start_refuses_its_late_write_for_a_day_then_expires(harness: Any) -> None:
    """The record closed in a start's place is no run, and nothing else removes it once its session is gone (a failed
    fork's copy): it stayed forever, also in a store without a retention. Now it is kept well past any write of its
    run still on its way (refused meanwhile), then expires; a run that was written stays."""
    if harness.real_account:
        pytest.skip("a real account expires items on its own schedule; not waited for here")
    store = harness.open()
    session_id = await new_session(store)
    written = await store.begin_run(run(session_id, new_id("written")))
    planned = run(session_id, new_id("late"))
    closed, written_now = await store.close_unwritten_start(planned)
    assert written_now and is_unwritten_start(closed)
    assert await store.close_unwritten_start(written) == (await store.get_run(written.run_id), False)

    await harness.expire(UNWRITTEN_START_KEPT.total_seconds() - 60)
    late = await store.begin_run(planned)  # a write still on its way, a day late: refused
    assert is_unwritten_start(late), late
    assert [r.run_id for r in await store.list_runs(session_id)] == [planned.run_id, written.run_id]

    await harness.expire(120)
    assert await store.get_run(planned.run_id) is None
    assert await store.get_run(planned.run_id, session_id=session_id) is None
    assert [r.run_id for r in await store.list_runs(session_id)] == [written.run_id]
    found = await store.get_run(written.run_id)  # by its id alone (Cosmos: its lookup item did not expire either)
    assert found is not None and found.status == "in_progress"


async def test_a_closed_start_expires_with_a_shorter_retention(harness: Any) -> None:
    if harness.real_account:
        pytest.skip("a real account expires items on its own schedule; not waited for here")
    store = harness.open(ttl_seconds=60)
    session_id = await new_session(store)
    planned = run(session_id, new_id("late"))
    await store.close_unwritten_start(planned)
    await harness.expire(61)
    assert await store.get_run(planned.run_id) is None


async def test_sqlite_sweeps_expired_closed_starts_without_a_retention(harness: Any, tmp_path: Any) -> None:
    if harness.backend != "sqlite":
        pytest.skip("SQLite's sweep")
    store = harness.open()
    session_id = await new_session(store)
    planned = run(session_id, new_id("late"))
    await store.close_unwritten_start(planned)
    await harness.expire(UNWRITTEN_START_KEPT.total_seconds() + 1)
    await store.sweep_expired()
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as conn:
        assert conn.execute("SELECT COUNT(*) FROM runs WHERE run_id = ?", (planned.run_id,)).fetchone() == (0,)
