"""Contract: runs (one active run per session, ordinals, idempotent begin, updates, finish), every backend."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from conftest import StoreHarness
from cosmos_faults import cosmos_writes_refused
from store_helpers import approval, new_id, new_session, run

from session_store import (
    ConflictError,
    NotFoundError,
    SessionBusyError,
    SessionMovedOnError,
    SessionRecord,
    SessionStore,
)
from session_store.rules import UNWRITTEN_HOLDER_AFTER, is_unwritten_start


async def test_begin_run_claims_the_session_and_numbers_runs(store: SessionStore) -> None:
    session_id = await new_session(store)
    first = await store.begin_run(run(session_id))
    assert first.ordinal == 1 and first.etag and first.created_at is not None
    session = await store.get_session(session_id)
    assert session.active_run_id == first.run_id and session.run_count == 1

    await store.finish_run(first.run_id, "completed", output={"text": "done"}, usage={"total_tokens": 7})
    second = await store.begin_run(run(session_id))
    assert second.ordinal == 2
    assert [r.run_id for r in await store.list_runs(session_id)] == [first.run_id, second.run_id]


async def test_begin_run_in_a_new_session_creates_it_already_held_by_the_run(store: SessionStore) -> None:
    session_id = new_id("s")
    fresh = SessionRecord(session_id=session_id, agent="assistant", owner_id="alice", owner_name="Alice")
    record = run(session_id)
    first = await store.begin_run(record, new_session=fresh)
    assert first.ordinal == 1 and first.status == "in_progress" and first.etag
    session = await store.get_session(session_id)
    assert session.active_run_id == first.run_id and session.run_count == 1
    assert (session.owner_id, session.owner_name, session.agent) == ("alice", "Alice", "assistant")
    assert await store.get_run(first.run_id) == first  # resolvable by id alone (its lookup is written)
    # The same call again (a retry) returns the run; nothing is claimed twice.
    assert await store.begin_run(record, new_session=fresh) == first
    assert (await store.get_session(session_id)).run_count == 1
    # The session then behaves as any other: busy while the run holds it, the next run's ordinal after it.
    with pytest.raises(SessionBusyError):
        await store.begin_run(run(session_id))
    await store.finish_run(first.run_id, "completed")
    assert (await store.begin_run(run(session_id))).ordinal == 2


async def test_a_run_whose_session_is_named_after_it_is_found_by_its_id_alone(store: SessionStore) -> None:
    run_id = new_id("run")
    first = await store.begin_run(run(run_id, run_id), new_session=SessionRecord(session_id=run_id, agent="assistant"))
    assert await store.get_run(run_id) == first
    updated = await store.update_run(run_id, metadata={"k": "v"})
    assert (await store.get_run(run_id)).metadata == {"k": "v"} == updated.metadata
    (asked,) = await store.put_approvals([approval(run_id, run_id).model_copy(update={"approval_id": f"{run_id}:c1"})])
    assert [a.run_id for a in await store.list_approvals(run_id=run_id)] == [run_id]
    assert await store.get_approval(f"{run_id}:c1") == asked  # found by its id alone
    decided = await store.decide_approval(f"{run_id}:c1", "approved", decided_by="bob")
    assert (await store.get_approval(f"{run_id}:c1")).status == "approved" == decided.status
    assert await store.get_approval(f"{run_id}:c2") is None and await store.get_approval("nope") is None
    finished = await store.finish_run(run_id, "completed", output={"text": "ok"})
    assert (await store.get_run(run_id)) == finished and finished.status == "completed"
    assert await store.get_run(new_id("run")) is None
    assert await store.delete_session(run_id)
    assert await store.get_run(run_id) is None


async def test_begin_run_in_a_new_session_refuses_an_existing_session(store: SessionStore) -> None:
    session_id = await new_session(store)
    fresh = SessionRecord(session_id=session_id, agent="assistant", owner_id="mallory")
    with pytest.raises(ConflictError):
        await store.begin_run(run(session_id), new_session=fresh)
    session = await store.get_session(session_id)
    assert session.active_run_id is None and session.owner_id is None and await store.list_runs(session_id) == []


async def test_second_run_on_a_busy_session_is_refused_with_the_active_run(store: SessionStore) -> None:
    session_id = await new_session(store)
    active = await store.begin_run(run(session_id))
    with pytest.raises(SessionBusyError) as caught:
        await store.begin_run(run(session_id))
    assert caught.value.active_run_id == active.run_id
    assert len(await store.list_runs(session_id)) == 1


async def test_begin_run_after_a_run_count_claims_only_a_session_that_has_not_moved_on(store: SessionStore) -> None:
    """`after_run_count`: continue a conversation from what the caller read; a run that began since (still active,
    or already finished) is `SessionMovedOnError`, and nothing is written."""
    session_id = await new_session(store)
    first = await store.begin_run(run(session_id), after_run_count=0)
    await store.finish_run(first.run_id, "completed")
    second = await store.begin_run(run(session_id), after_run_count=1)  # read before `second` began ...
    with pytest.raises(SessionMovedOnError) as active:
        await store.begin_run(run(session_id), after_run_count=1)  # ... by another caller, as this one did
    await store.finish_run(second.run_id, "completed")
    with pytest.raises(SessionMovedOnError) as finished:
        await store.begin_run(run(session_id), after_run_count=1)
    assert (active.value.run_count, finished.value.run_count) == (2, 2)
    assert [r.ordinal for r in await store.list_runs(session_id)] == [1, 2]
    assert await store.begin_run(run(session_id, second.run_id), after_run_count=1) == await store.get_run(
        second.run_id
    )  # a retry of the run that claimed it


@contextmanager
def runs_unwritable(harness: StoreHarness, store: SessionStore) -> Iterator[None]:
    """Meanwhile a start stops between its claim of the session and its run's write: on Cosmos the claim lands (its
    own write) and the run item is refused; on SQLite, whose begin_run is one transaction, nothing lands."""
    if harness.backend == "cosmos":
        with cosmos_writes_refused(store, "runs"):
            yield
        return

    def refused(*args: object, **kwargs: object) -> object:
        raise sqlite3.OperationalError("disk I/O error (injected)")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "_put_run", refused)
        yield


@pytest.mark.parametrize("queued", [False, True], ids=["holding", "queued"])
async def test_a_start_that_died_before_its_run_was_written_is_not_counted(
    harness: StoreHarness, queued: bool
) -> None:
    """A start that claimed the session (or queued in it) and died before its run was written is no run: once the
    session goes on without it, `run_count` counts the written runs only, the same on both stores. On Cosmos the
    dead holder's position stayed counted (its claim took it): a caller waiting with `after_run_count` was told the
    session had moved on for a run that never existed, and the next run skipped a position."""
    store = harness.open()
    session_id = await new_session(store)
    first = await store.begin_run(run(session_id, new_id("first")))
    if not queued:
        await store.finish_run(first.run_id, "completed")
    with runs_unwritable(harness, store), pytest.raises(Exception):  # noqa: B017 - each store fails in its own way
        await store.begin_run(run(session_id, new_id("dead")), queue="back" if queued else None)
    if queued:
        await store.finish_run(first.run_id, "completed")  # the session is handed to the dead start, if it queued
    await harness.expire(UNWRITTEN_HOLDER_AFTER.total_seconds() + 1)  # the session goes on without it (Cosmos)

    following = await store.begin_run(run(session_id, new_id("next")), after_run_count=1)
    assert following.ordinal == 2
    session = await store.get_session(session_id)
    assert (session.run_count, session.active_run_id) == (2, following.run_id)
    ordinals = sorted(r.ordinal for r in await store.list_runs(session_id) if not is_unwritten_start(r))
    assert ordinals == [1, 2]


async def test_begin_run_again_with_the_same_id_returns_the_stored_run(store: SessionStore) -> None:
    session_id = await new_session(store)
    record = run(session_id)
    first = await store.begin_run(record)
    again = await store.begin_run(record)
    assert again == first
    assert (await store.get_session(session_id)).run_count == 1


async def test_exactly_one_of_twenty_concurrent_starts_wins(store: SessionStore) -> None:
    session_id = await new_session(store)
    attempts = [run(session_id) for _ in range(20)]
    results = await asyncio.gather(*(store.begin_run(r) for r in attempts), return_exceptions=True)
    winners = [r for r in results if not isinstance(r, BaseException)]
    losers = [r for r in results if isinstance(r, BaseException)]
    assert len(winners) == 1, results
    assert all(isinstance(e, SessionBusyError) and e.active_run_id == winners[0].run_id for e in losers)
    session = await store.get_session(session_id)
    assert session.active_run_id == winners[0].run_id and session.run_count == 1
    assert [r.run_id for r in await store.list_runs(session_id)] == [winners[0].run_id]


async def test_begin_run_on_a_missing_session_is_not_found(store: SessionStore) -> None:
    with pytest.raises(NotFoundError):
        await store.begin_run(run(new_id("missing")))


async def test_get_run_resolves_from_the_run_id_alone(store: SessionStore) -> None:
    session_id = await new_session(store)
    started = await store.begin_run(run(session_id))
    assert await store.get_run(started.run_id) == started
    assert await store.get_run(new_id("run")) is None


async def test_a_workflow_run_keeps_its_kind(store: SessionStore) -> None:
    session_id = await new_session(store)
    started = await store.begin_run(run(session_id).model_copy(update={"kind": "workflow", "agent": "review"}))
    stored = await store.get_run(started.run_id)
    assert (stored.kind, stored.agent) == ("workflow", "review")
    assert (await store.list_runs(session_id))[0].kind == "workflow"


async def test_update_run_changes_mutable_fields_under_an_etag(store: SessionStore) -> None:
    session_id = await new_session(store)
    started = await store.begin_run(run(session_id))
    updated = await store.update_run(started.run_id, status="requires_action", instance_id="inst-1", input_seq=3)
    assert (updated.status, updated.instance_id, updated.input_seq) == ("requires_action", "inst-1", 3)
    assert updated.etag != started.etag and updated.ordinal == started.ordinal
    assert await store.get_run(started.run_id) == updated

    with pytest.raises(ConflictError):
        await store.update_run(started.run_id, if_match=started.etag, status="in_progress")
    ok = await store.update_run(started.run_id, if_match=updated.etag, metadata={"k": "v"})
    assert ok.metadata == {"k": "v"} and ok.status == "requires_action"

    with pytest.raises(ValueError):
        await store.update_run(started.run_id, session_id="elsewhere")
    with pytest.raises(NotFoundError):
        await store.update_run(new_id("run"), status="failed")


async def test_concurrent_updates_are_all_applied_to_the_latest_version(store: SessionStore) -> None:
    """Each of ten concurrent read-modify-writes (under the etag it read, retried on conflict) adds its own key:
    a lost update (one write based on a stale version) would drop a key. Each write makes a new version."""
    session_id = await new_session(store)
    started = await store.begin_run(run(session_id))

    async def add_key(i: int) -> str:
        while True:
            current = await store.get_run(started.run_id)
            try:
                saved = await store.update_run(
                    started.run_id, if_match=current.etag, metadata={**current.metadata, f"k{i}": i}
                )
            except ConflictError:
                continue
            return saved.etag

    etags = await asyncio.gather(*(add_key(i) for i in range(10)))
    final = await store.get_run(started.run_id)
    assert final.metadata == {f"k{i}": i for i in range(10)}
    assert len(set(etags)) == 10 and final.etag in etags

    blind = await asyncio.gather(*(store.update_run(started.run_id, usage={"step": i}) for i in range(10)))
    assert len({r.etag for r in blind}) == 10  # ten versions, one after the other: none overwrote another's base
    final = await store.get_run(started.run_id)
    assert final.metadata == {f"k{i}": i for i in range(10)}  # fields not named by an update are kept
    assert final.usage in [{"step": i} for i in range(10)] and final.etag in {r.etag for r in blind}


async def test_finish_run_releases_the_session_and_the_first_finish_wins(store: SessionStore) -> None:
    session_id = await new_session(store)
    started = await store.begin_run(run(session_id))
    done = await store.finish_run(started.run_id, "cancelled", error={"code": "cancelled"})
    assert done.status == "cancelled" and done.finished
    assert (await store.get_session(session_id)).active_run_id is None

    late = await store.finish_run(started.run_id, "completed", output={"text": "too late"})
    assert late.status == "cancelled" and late.output is None

    with pytest.raises(ValueError):
        await store.finish_run(started.run_id, "in_progress")


async def test_finishing_an_old_run_does_not_release_the_next_one(store: SessionStore) -> None:
    session_id = await new_session(store)
    first = await store.begin_run(run(session_id))
    await store.finish_run(first.run_id, "completed")
    second = await store.begin_run(run(session_id))
    await store.finish_run(first.run_id, "completed")  # a retried finish of the old run
    assert (await store.get_session(session_id)).active_run_id == second.run_id
