"""`idempotency.claim` over the real SQLite store: a key whose first request died between claiming it and creating
its run (process ended, or the store failed the release too) must not stay "busy" for the rest of its 24 hours; nor
a workflow signal's key whose request died before queuing its signal (`workflow_signals`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from http_api import idempotency, workflow_signals
from http_api.caller import acting_as
from http_api.identity import Principal
from http_api.problems import ApiProblem
from session_store import RunRecord, SqliteSessionStore, StoreUnavailableError

ALICE = Principal(id="alice", auth_type="easyauth")
FINGERPRINT = idempotency.fingerprint("agents/helper", {"input": "hi"})


def store_behind(minutes: float) -> SqliteSessionStore:
    """A store whose writes are dated `minutes` ago: what the key's ledger looks like that much later."""
    return SqliteSessionStore(":memory:", clock=lambda: datetime.now(UTC) - timedelta(minutes=minutes))


async def test_a_claim_whose_start_died_before_its_run_is_taken_over_once_stale() -> None:
    store = store_behind(10)
    dead = await idempotency.claim(store, ALICE, "k", FINGERPRINT, "r-dead")
    assert dead.first  # ... and its request died here: no run, no release
    retry = await idempotency.claim(store, ALICE, "k", FINGERPRINT, "r-retry")
    assert retry.first and retry.result_id == "r-retry" and retry.generation == "1"
    marks = {e.key for e in await store.list_effects(retry.partition, kind=idempotency.KIND)}
    assert "0.failed" in marks
    # The retry's own generation, once it created its run, is what the key answers with.
    await store.create_session("s1", "helper")
    await store.begin_run(RunRecord(run_id="r-retry", session_id="s1", agent="helper"))
    again = await idempotency.claim(store, ALICE, "k", FINGERPRINT, "r-third")
    assert not again.first and again.result_id == "r-retry"
    await store.close()


async def test_a_stale_claim_whose_start_was_closed_unwritten_is_taken_over_not_replayed() -> None:
    """A start that failed closes its run in its place (`close_unwritten_start`: a `start_interrupted` record that
    stops a late write) and then releases its key; if that release fails too (or the process dies between), the key
    pointed at the closed record and every retry for 24 hours replayed a failed run. The record is no run the key
    started: once stale, the claim is taken over with a fresh run id (the record still blocks the old one)."""
    store = store_behind(10)
    dead = await idempotency.claim(store, ALICE, "k", FINGERPRINT, "r-dead")
    await store.create_session("s1", "helper")
    closed, written = await store.close_unwritten_start(RunRecord(run_id="r-dead", session_id="s1", agent="helper"))
    assert written and closed.status == "failed"  # ... and the release of the key failed here
    retry = await idempotency.claim(store, ALICE, "k", FINGERPRINT, "r-retry")
    assert dead.first and retry.first and retry.result_id == "r-retry" and retry.generation == "1"
    await store.close()


async def test_a_stale_claim_whose_run_exists_is_replayed() -> None:
    store = store_behind(10)
    first = await idempotency.claim(store, ALICE, "k", FINGERPRINT, "r1")
    await store.create_session("s1", "helper")
    await store.begin_run(RunRecord(run_id="r1", session_id="s1", agent="helper"))
    again = await idempotency.claim(store, ALICE, "k", FINGERPRINT, "r2")
    assert first.first and not again.first and again.result_id == "r1"
    assert (await idempotency.started_run(store, again)).run_id == "r1"
    await store.close()


async def test_a_replay_whose_run_exists_answers_without_reading_the_ledger_again() -> None:
    """The usual replay (a retry after a lost response): its run is there, so `started_run` answers from the run
    alone; the key's ledger (a query on Cosmos) is read once, by the claim."""
    store = store_behind(0)
    await idempotency.claim(store, ALICE, "k", FINGERPRINT, "r1")
    await store.create_session("s1", "helper")
    await store.begin_run(RunRecord(run_id="r1", session_id="s1", agent="helper"))
    again = await idempotency.claim(store, ALICE, "k", FINGERPRINT, "r2")
    real, ledger_reads = store.list_effects, []

    async def counted(*args: Any, **kwargs: Any) -> Any:
        ledger_reads.append(args)
        return await real(*args, **kwargs)

    store.list_effects = counted  # type: ignore[method-assign]
    assert (await idempotency.started_run(store, again)).run_id == "r1"
    assert ledger_reads == []
    await store.close()


async def test_a_young_claim_without_its_run_is_left_to_its_request() -> None:
    """A start still creating its run is not taken over: the retry waits for it (409 busy at worst), never a 2nd run."""
    store = store_behind(0)
    first = await idempotency.claim(store, ALICE, "k", FINGERPRINT, "r1")
    again = await idempotency.claim(store, ALICE, "k", FINGERPRINT, "r2")
    assert first.first and not again.first and again.result_id == "r1"
    with pytest.raises(ApiProblem):
        await idempotency.claim(store, ALICE, "k", idempotency.fingerprint("agents/helper", {"input": "x"}), "r3")
    await store.close()


async def signal_dying_in(store: SqliteSessionStore, method: str, where: Callable[[str], bool]) -> None:
    """A signal request (key "k") whose process ends inside `store.<method>`, at the call whose first argument after
    the session `where` picks: nothing after that point runs (no release of its claim either)."""
    real = getattr(store, method)

    async def dying(session_id: str, first: str, *args: Any) -> Any:
        if where(first):
            raise asyncio.CancelledError
        return await real(session_id, first, *args)

    setattr(store, method, dying)
    try:
        with acting_as(ALICE), pytest.raises(asyncio.CancelledError):
            await workflow_signals.append_once(store, "wf-control", "go", {"n": 1}, "k")
    finally:
        setattr(store, method, real)


async def test_a_signal_claim_whose_request_died_before_queuing_is_taken_over_once_stale() -> None:
    """A signal request that died between claiming its key and queuing its signal: the retry, once the claim is
    `ABANDONED_AFTER` old, queues the signal (once), instead of answering 409 busy for as long as the workflow lives."""
    store = store_behind(10)
    await store.create_session("wf-control", "workflow:flow")
    await signal_dying_in(store, "append_signal", lambda name: True)
    with acting_as(ALICE):
        retry = await workflow_signals.append_once(store, "wf-control", "go", {"n": 1}, "k")
        again = await workflow_signals.append_once(store, "wf-control", "go", {"n": 1}, "k")
    assert retry == again and retry.index == 1
    assert [s.signal_id for s in await store.list_signals("wf-control", "go")] == [retry.signal_id]
    await store.close()


async def test_a_stale_signal_claim_whose_signal_is_queued_is_replayed() -> None:
    """Died after queuing, before noting where (no `.done`): an old claim is not taken over, its signal answers."""
    store = store_behind(10)
    await store.create_session("wf-control", "workflow:flow")
    await signal_dying_in(store, "record_effect", lambda key: key.endswith(".done"))
    with acting_as(ALICE):
        retry = await workflow_signals.append_once(store, "wf-control", "go", {"n": 1}, "k")
    queue = await store.list_signals("wf-control", "go")
    assert [(s.signal_id, s.index) for s in queue] == [(retry.signal_id, retry.index)]
    await store.close()



@pytest.mark.parametrize("written", [True, False], ids=["written-then-lost", "refused"])
async def test_a_signal_append_that_failed_frees_the_key_only_if_nothing_was_queued(written: bool) -> None:
    """The store took the append but failed to say so (a timeout after the write): the request answers with the
    signal it queued, and a retry with the key gets that same one, never a copy. An append the store refused: the
    request fails and the retry queues the signal, once."""
    store = store_behind(0)
    await store.create_session("wf-control", "workflow:flow")
    real = store.append_signal

    async def failing(*args: Any) -> Any:
        if written:
            await real(*args)
        raise TimeoutError("the store's answer was lost")

    store.append_signal = failing  # type: ignore[method-assign]
    with acting_as(ALICE):
        try:
            first = await workflow_signals.append_once(store, "wf-control", "go", {"n": 1}, "k")
        except TimeoutError:
            first = None
        store.append_signal = real  # type: ignore[method-assign]
        retry = await workflow_signals.append_once(store, "wf-control", "go", {"n": 1}, "k")
    assert (first == retry) if written else first is None
    assert [s.signal_id for s in await store.list_signals("wf-control", "go")] == [retry.signal_id]
    await store.close()


async def test_an_outlived_claim_is_taken_over_by_exactly_one_request() -> None:
    """A run written by a start that never started it is started by one retry only (`RunStart.unstarted`)."""
    young, old = store_behind(0), store_behind(10)
    fresh = await idempotency.claim(young, ALICE, "k", FINGERPRINT, "r1")
    assert not idempotency.outlived(fresh)  # its request may still be starting the run
    claimed = await idempotency.claim(old, ALICE, "k", FINGERPRINT, "r1")
    assert idempotency.outlived(claimed)
    taken = await asyncio.gather(*(idempotency.take_over(old, claimed) for _ in range(10)))
    assert sorted(taken) == [False] * 9 + [True]
    assert not await idempotency.take_over(old, claimed)  # and only ever one
    await young.close()
    await old.close()


def answers_lost_once(store: SqliteSessionStore, *, landed_by: Callable[[], Any] | None = None) -> None:
    """The store's next `record_effect` lands (or, `landed_by`, another request's lands in its place), then raises
    as a Cosmos write whose answer was lost does (a timeout, a 503 after the write)."""
    record_effect = store.record_effect

    async def answer_lost(*args: Any, **kwargs: Any) -> Any:
        store.record_effect = record_effect  # type: ignore[method-assign]
        await (landed_by() if landed_by is not None else record_effect(*args, **kwargs))
        raise StoreUnavailableError("the store took the write; its answer was lost")

    store.record_effect = answer_lost  # type: ignore[method-assign]


async def test_a_claim_whose_answer_was_lost_is_its_requests_own() -> None:
    """Its create landed: the entry names the request's new run id, so the request goes on as the first (before, it
    and its retries were told "not done yet" until the claim was 5 minutes old)."""
    store = store_behind(0)
    answers_lost_once(store)
    claim = await idempotency.claim(store, ALICE, "k", FINGERPRINT, "r-mine")
    assert claim.first and claim.result_id == "r-mine" and claim.generation == "0"
    replay = await idempotency.claim(store, ALICE, "k", FINGERPRINT, "r-retry")
    assert not replay.first and replay.result_id == "r-mine"
    await store.close()


async def test_a_claim_whose_answer_was_lost_to_another_requests_create_is_not_taken() -> None:
    """Another request with the key created the generation first (its own run id in it): this request's create
    failed, and its error stands (a retry then answers with the other request's run) - never two firsts."""
    store = store_behind(0)
    other: list[idempotency.Claim] = []

    async def other_request_first() -> None:
        other.append(await idempotency.claim(store, ALICE, "k", FINGERPRINT, "r-other"))

    answers_lost_once(store, landed_by=other_request_first)
    with pytest.raises(StoreUnavailableError):
        await idempotency.claim(store, ALICE, "k", FINGERPRINT, "r-mine")
    assert other[0].first and other[0].result_id == "r-other"
    retry = await idempotency.claim(store, ALICE, "k", FINGERPRINT, "r-retry")
    assert not retry.first and retry.result_id == "r-other"
    await store.close()


async def test_of_requests_racing_for_a_key_whose_first_answer_was_lost_exactly_one_is_first() -> None:
    store = store_behind(0)
    answers_lost_once(store)
    claims = await asyncio.gather(
        *(idempotency.claim(store, ALICE, "k", FINGERPRINT, f"r{i}") for i in range(8)), return_exceptions=True
    )
    made = [c for c in claims if isinstance(c, idempotency.Claim)]
    assert len(made) == 8, claims  # the request whose answer was lost recognised its claim; the others replay it
    [first] = [c for c in made if c.first]
    assert {c.result_id for c in made} == {first.result_id}
    await store.close()
