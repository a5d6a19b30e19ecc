"""Contract: a failed run, the latest of its session, can be reopened once (a rewind), on every backend."""

from __future__ import annotations

import asyncio

import pytest
from conftest import StoreHarness
from killed_store import HostKilled, KilledAfterOneWrite
from store_helpers import new_session, run

from session_store import RunNotReopenableError, SessionBusyError, SessionStore


def rewind(rewind_id: str) -> dict[str, str]:
    return {"rewind_id": rewind_id, "by": "alice", "at": "2026-11-25T00:00:00Z", "from_step": "call_model",
            "error_code": "model_call_failed"}


async def failed_run(store: SessionStore, session_id: str | None = None) -> str:
    started = await store.begin_run(run(session_id or await new_session(store)))
    await store.finish_run(started.run_id, "failed", error={"code": "model_call_failed", "message": "down"})
    return started.run_id


async def test_a_reopened_run_holds_its_session_again_and_records_the_rewind(store: SessionStore) -> None:
    run_id = await failed_run(store)
    reopened = await store.reopen_run(run_id, rewind("r1"))
    assert reopened.status == "in_progress" and reopened.error is None and reopened.output is None
    assert reopened.rewinds == [rewind("r1")]
    session = await store.get_session(reopened.session_id)
    assert session.active_run_id == run_id and session.run_count == reopened.ordinal
    with pytest.raises(SessionBusyError):  # one active run per session, as ever
        await store.begin_run(run(reopened.session_id))
    finished = await store.finish_run(run_id, "completed", output={"text": "done"})  # it can finish again
    assert finished.status == "completed" and finished.rewinds == [rewind("r1")]
    assert (await store.get_session(reopened.session_id)).active_run_id is None


async def test_the_same_rewind_again_is_a_no_op_and_another_one_loses(store: SessionStore) -> None:
    run_id = await failed_run(store)
    first = await store.reopen_run(run_id, rewind("r1"))
    again = await store.reopen_run(run_id, rewind("r1"))
    assert again.rewinds == first.rewinds == [rewind("r1")]
    with pytest.raises(RunNotReopenableError) as lost:
        await store.reopen_run(run_id, rewind("r2"))
    assert lost.value.reason == "not_failed"


async def test_of_concurrent_rewinds_exactly_one_wins(store: SessionStore) -> None:
    run_id = await failed_run(store)
    results = await asyncio.gather(
        *(store.reopen_run(run_id, rewind(f"r{i}")) for i in range(6)), return_exceptions=True
    )
    won = [r for r in results if not isinstance(r, BaseException)]
    assert len(won) == 1, results
    assert all(isinstance(r, RunNotReopenableError) for r in results if isinstance(r, BaseException))
    assert (await store.get_run(run_id)).rewinds == won[0].rewinds


async def test_only_a_failed_run_and_only_the_latest_of_its_session(store: SessionStore) -> None:
    session_id = await new_session(store)
    completed = await store.begin_run(run(session_id))
    with pytest.raises(RunNotReopenableError) as running:
        await store.reopen_run(completed.run_id, rewind("r1"))
    assert running.value.reason == "not_failed"
    await store.finish_run(completed.run_id, "completed", output={"text": "ok"})
    with pytest.raises(RunNotReopenableError):
        await store.reopen_run(completed.run_id, rewind("r1"))
    earlier = await failed_run(store, session_id)
    await failed_run(store, session_id)  # a later run came after it
    with pytest.raises(RunNotReopenableError) as not_latest:
        await store.reopen_run(earlier, rewind("r1"))
    assert not_latest.value.reason == "not_latest"


async def test_a_session_remembers_where_it_was_forked_from(store: SessionStore) -> None:
    source = {"session_id": "s-original", "run_id": "r-original"}
    created = await store.create_session("forked-1", "assistant", owner_id="alice", forked_from=source)
    assert created.forked_from == source
    assert (await store.get_session("forked-1")).forked_from == source
    assert (await store.create_session("plain-1", "assistant")).forked_from is None


async def killed_between_the_reopens_writes(harness: StoreHarness, store: SessionStore, run_id: str) -> None:
    if harness.backend != "cosmos":
        pytest.skip("one SQLite transaction: nothing is half written")
    KilledAfterOneWrite.arm(store)  # the reopen's writes are replaces, of two containers: no transaction spans them
    with pytest.raises(HostKilled):
        await store.reopen_run(run_id, rewind("killed"))


async def test_a_reopen_killed_between_its_writes_leaves_the_session_free_for_a_new_run(
    harness: StoreHarness, store: SessionStore
) -> None:
    """The session was claimed first: a host killed before the run was written left the session held by a failed
    run for good (no new run could begin, and a queued one would wait forever)."""
    run_id = await failed_run(store)
    session_id = (await store.get_run(run_id)).session_id
    await killed_between_the_reopens_writes(harness, store, run_id)

    follow_up = await store.begin_run(run(session_id))
    assert follow_up.status == "in_progress"
    assert (await store.get_session(session_id)).active_run_id == follow_up.run_id
    with pytest.raises(RunNotReopenableError) as too_late:  # the rewind, sent again, cannot go on any more
        await store.reopen_run(run_id, rewind("killed"))
    assert too_late.value.reason == "not_latest"
    closed = await store.get_run(run_id)
    assert closed.status == "failed" and closed.rewinds == []  # the rewind never went on
    assert closed.error["code"] == "model_call_failed"


async def test_a_reopen_killed_between_its_writes_is_completed_when_sent_again(
    harness: StoreHarness, store: SessionStore
) -> None:
    run_id = await failed_run(store)
    session_id = (await store.get_run(run_id)).session_id
    await killed_between_the_reopens_writes(harness, store, run_id)

    reopened = await store.reopen_run(run_id, rewind("killed"))
    assert reopened.status == "in_progress" and [r["rewind_id"] for r in reopened.rewinds] == ["killed"]
    assert (await store.get_session(session_id)).active_run_id == run_id
    with pytest.raises(SessionBusyError):
        await store.begin_run(run(session_id))


async def test_a_run_begun_between_the_reopens_writes_keeps_the_session_and_the_rewind_loses(
    harness: StoreHarness, store: SessionStore
) -> None:
    if harness.backend != "cosmos":
        pytest.skip("one SQLite transaction: nothing comes between its writes")
    run_id = await failed_run(store)
    session_id = (await store.get_run(run_id)).session_id
    begun: list[str] = []

    async def a_new_run() -> None:
        begun.append((await store.begin_run(run(session_id))).run_id)

    KilledAfterOneWrite.arm(store, meanwhile=a_new_run)
    with pytest.raises(RunNotReopenableError) as lost:
        await store.reopen_run(run_id, rewind("late"))
    assert lost.value.reason == "not_latest"
    assert (await store.get_session(session_id)).active_run_id == begun[0]
    failed = await store.get_run(run_id)  # as it was: its rewind never went on
    assert failed.status == "failed" and failed.rewinds == [] and failed.error["message"] == "down"


async def test_a_rewind_that_read_the_run_before_another_rewind_loses_even_once_it_failed_again(
    store: SessionStore,
) -> None:
    run_id = await failed_run(store)
    await store.reopen_run(run_id, rewind("first"), after_rewinds=0)
    await store.finish_run(run_id, "failed", error={"code": "model_call_failed", "message": "down again"})
    with pytest.raises(RunNotReopenableError) as stale:  # it read the run with no rewind: its step is the one before
        await store.reopen_run(run_id, rewind("stale"), after_rewinds=0)
    assert stale.value.reason == "not_failed"
    again = await store.reopen_run(run_id, rewind("second"), after_rewinds=1)
    assert [r["rewind_id"] for r in again.rewinds] == ["first", "second"]
