"""Cosmos writes a start's claim of the session and its run in two operations (two containers: no transaction spans
them). A start stopped between them (a crash, a 503 after the claim landed) must not leave the session held by a run
that does not exist; and closing such a holder must not let a start whose run write was only slow hold the session
next to the run that took it over (exactly one holder)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from store_helpers import new_session, run

from session_store import ManualClock, RunRecord, SessionBusyError, StoreSettings
from session_store.cosmos_store import CosmosSessionStore
from session_store.rules import UNWRITTEN_HOLDER_AFTER, is_unwritten_start

pytestmark = pytest.mark.cosmos
GRACE_S = UNWRITTEN_HOLDER_AFTER.total_seconds()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def store(
    cosmos_account: tuple[str, str | None, bool], cosmos_database: str, clock: ManualClock
) -> Any:
    endpoint, key, _ = cosmos_account
    opened = CosmosSessionStore.open(
        StoreSettings(COSMOS_ENDPOINT=endpoint, COSMOS_KEY=key, COSMOS_DATABASE=cosmos_database), clock=clock
    )
    yield opened
    await opened.close()


async def start_lost(store: CosmosSessionStore, session_id: str, monkeypatch: pytest.MonkeyPatch) -> RunRecord:
    """A start in the session whose claim landed and whose run write never did (its host died in between)."""
    lost = run(session_id, "lost-start")
    runs = store._db._c["runs"]
    create_item = runs.create_item

    async def refused(body: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if body["id"] == lost.run_id and body["status"] != "failed":
            raise ConnectionError("the host died before writing the run")
        return await create_item(body, *args, **kwargs)

    monkeypatch.setattr(runs, "create_item", refused)
    with pytest.raises(Exception, match="host died"):
        await store.begin_run(lost)
    return lost


async def test_a_start_whose_run_write_lands_after_its_claim_was_closed_is_not_started(
    store: CosmosSessionStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slow start's own write comes second: it finds its run closed (`start_interrupted`) instead of holding the
    session that the other start took, and the other start is the only holder."""
    session_id = await new_session(store)
    slow, other = run(session_id, "slow-start"), run(session_id, "other-start")
    runs = store._db._c["runs"]
    create_item = runs.create_item
    taken_over: list[Any] = []
    delayed: list[str] = []

    async def slow_write(body: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if body["id"] == slow.run_id and not delayed:  # meanwhile the claim looks dead, and another start comes
            delayed.append(body["id"])
            clock.advance(GRACE_S + 1)
            taken_over.append(await store.begin_run(other))
        return await create_item(body, *args, **kwargs)

    monkeypatch.setattr(runs, "create_item", slow_write)
    late = await store.begin_run(slow)

    assert is_unwritten_start(late) and late.finished, late
    assert [r.status for r in taken_over] == ["in_progress"]
    session = await store.get_session(session_id)
    assert (session.active_run_id, session.queued_run_ids) == (other.run_id, [])
    assert {r.run_id: r.status for r in await store.list_runs(session_id)} == {
        slow.run_id: "failed", other.run_id: "in_progress"
    }


async def test_of_starts_racing_to_take_over_a_slow_start_exactly_one_holds_and_the_late_write_is_not_started(
    store: CosmosSessionStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several starts take the slow start's claim for dead at once, then its own write lands: one of them holds the
    session (the others are told it is busy, not handed a second claim), and the slow start is closed, not started."""
    session_id = await new_session(store)
    slow = run(session_id, "slow-start")
    racers = [run(session_id, f"racer-{n}") for n in range(4)]
    runs = store._db._c["runs"]
    create_item = runs.create_item
    raced: list[Any] = []
    delayed: list[str] = []

    async def slow_write(body: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if body["id"] == slow.run_id and not delayed:  # the racers' own create of its closed record goes through
            delayed.append(body["id"])
            clock.advance(GRACE_S + 1)
            raced.extend(await asyncio.gather(*(store.begin_run(r) for r in racers), return_exceptions=True))
        return await create_item(body, *args, **kwargs)

    monkeypatch.setattr(runs, "create_item", slow_write)
    late = await store.begin_run(slow)

    assert is_unwritten_start(late) and late.finished, late
    winners = [r for r in raced if not isinstance(r, BaseException)]
    assert [r.status for r in winners] == ["in_progress"], raced
    assert all(isinstance(r, SessionBusyError) for r in raced if isinstance(r, BaseException)), raced
    session = await store.get_session(session_id)
    assert (session.active_run_id, session.queued_run_ids) == (winners[0].run_id, [])
    assert {r.run_id: r.status for r in await store.list_runs(session_id)} == {
        slow.run_id: "failed", winners[0].run_id: "in_progress"
    }


async def test_a_holder_without_a_record_is_busy_until_its_write_had_time_to_land(
    store: CosmosSessionStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = await new_session(store)
    lost = await start_lost(store, session_id, monkeypatch)
    with pytest.raises(SessionBusyError):
        await store.begin_run(run(session_id))
    clock.advance(GRACE_S)
    started = await store.begin_run(run(session_id, "next-start"))
    assert (started.status, started.ordinal) == ("in_progress", 1)  # the dead start's position is given back
    closed = await store.get_run(lost.run_id)  # by its id alone: its lookup item was written with it
    assert closed is not None and is_unwritten_start(closed), closed
    assert (await store.get_session(session_id)).active_run_id == "next-start"


async def test_closing_a_dead_start_reads_one_run_of_the_session_not_all(
    store: CosmosSessionStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether the dead start counted its position is one run's question: its cost does not grow with the session."""
    session_id = await new_session(store)
    for n in range(3):
        await store.begin_run(run(session_id, f"done-{n}"))
        await store.finish_run(f"done-{n}", "completed", output={"text": "done"})
    await start_lost(store, session_id, monkeypatch)
    query = store._db.query
    queried: list[Any] = []

    async def counting(*args: Any, **kwargs: Any) -> list[Any]:
        items = await query(*args, **kwargs)
        queried.extend(items)
        return items

    monkeypatch.setattr(store._db, "query", counting)
    clock.advance(GRACE_S)
    started = await store.begin_run(run(session_id, "next-start"))
    assert (started.status, started.ordinal) == ("in_progress", 4)  # the dead start's position is given back
    assert len(queried) <= 1, queried
