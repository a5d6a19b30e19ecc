"""`run_lifecycle.create_and_start` over the real SQLite store: what happens to the run, its session and the start's
claim when creating the run fails (and when it failed after its write landed), when starting its orchestration
fails, and when the store fails too."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from agent_runs.conversation_cache import ConversationCache
from agent_runtime.messages import Message
from http_api.problems import ApiProblem
from http_api.run_lifecycle import cancel, create_and_start
from session_store import MessageRecord, RunRecord, SessionBusyError, SqliteSessionStore, StoreUnavailableError
from session_store.rules import unwritten_start


class OrchestrationDown(RuntimeError):
    """What the Durable client raised when asked to start the orchestration."""


async def store_with_session() -> SqliteSessionStore:
    store = SqliteSessionStore(":memory:")
    await store.create_session("s1", "helper")
    return store


class TaskHub:
    """The Durable client's view of the task hub (`StateReader`): which runs' orchestrations exist; `unreadable`:
    the read fails too."""

    def __init__(self, *started: str, unreadable: bool = False) -> None:
        self.started, self.unreadable = set(started), unreadable

    async def state(self, instance_id: str) -> object | None:
        if self.unreadable:
            raise OrchestrationDown("the task hub is unreachable")
        return {"instanceId": instance_id} if instance_id in self.started else None


NONE_STARTED = TaskHub()


def record(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, session_id="s1", agent="helper")


async def test_a_run_that_cannot_be_created_frees_the_claim_and_starts_nothing() -> None:
    store = await store_with_session()
    await store.begin_run(record("active"))
    unclaimed, launched = [], []

    async def launch(run: RunRecord, submitting: Callable[[], None]) -> None:
        launched.append(run.run_id)

    async def release() -> None:
        unclaimed.append(True)

    with pytest.raises(SessionBusyError):
        await create_and_start(
            store, record("second"), lambda: store.begin_run(record("second")), launch, on_unclaimed=release,
            orchestrations=NONE_STARTED,
        )
    assert unclaimed == [True] and launched == []
    assert await store.get_run("second") is None
    await store.close()


@pytest.mark.parametrize("asked_for", [True, False], ids=["orchestration_refused", "input_refused"])
async def test_a_run_whose_orchestration_cannot_start_is_abandoned_and_frees_its_session(asked_for: bool) -> None:
    """Its orchestration refused (the task hub unreachable) or never asked for (its input's write failed: 503): the
    run is closed `start_failed` and its session freed. Once asked for, the orchestration may start late, so the
    claim stays with the run (a retry with the key answers with it); never asked for, the run never runs: the claim
    is freed, and a retry with the key starts the run afresh (it was answered with the failure)."""
    store = await store_with_session()
    unclaimed = []
    failure = OrchestrationDown("the task hub is unreachable") if asked_for else StoreUnavailableError("input lost")

    async def launch(run: RunRecord, submitting: Callable[[], None]) -> None:
        if asked_for:
            submitting()
        raise failure

    async def release() -> None:
        unclaimed.append(True)

    with pytest.raises(type(failure)):
        await create_and_start(store, record("r1"), lambda: store.begin_run(record("r1")), launch, on_unclaimed=release,
                               orchestrations=NONE_STARTED)
    abandoned = await store.get_run("r1")
    assert abandoned is not None and abandoned.status == "failed"
    assert abandoned.error == {"code": "start_failed", "message": "could not start"}
    assert unclaimed == ([] if asked_for else [True])
    session = await store.get_session("s1")
    assert session is not None and session.active_run_id is None
    assert (await store.begin_run(record("r2"))).status != "failed"  # the next start in the session runs
    await store.close()


async def test_when_the_store_fails_too_the_start_fails_with_its_own_error(caplog: pytest.LogCaptureFixture) -> None:
    store = await store_with_session()

    async def launch(run: RunRecord, submitting: Callable[[], None]) -> None:
        await store.close()  # the store goes away with the orchestration: abandoning the run cannot be written
        raise OrchestrationDown("the task hub is unreachable")

    with pytest.raises(OrchestrationDown):
        await create_and_start(store, record("r1"), lambda: store.begin_run(record("r1")), launch,
                               orchestrations=NONE_STARTED)
    assert "could not mark run r1 as failed after its start failed" in caplog.text  # the next start reconciles it


class AnswerLost(RuntimeError):
    """What the store's client raised after the store took the write (a timeout, a dropped connection)."""


async def test_a_run_written_by_a_create_that_failed_is_launched_and_keeps_the_claim() -> None:
    store = await store_with_session()
    unclaimed, launched = [], []

    async def create() -> RunRecord:
        await store.begin_run(record("r1"))
        raise AnswerLost("the write landed, its answer did not")

    async def launch(run: RunRecord, submitting: Callable[[], None]) -> None:
        launched.append(run.run_id)

    async def release() -> None:
        unclaimed.append(True)

    run = await create_and_start(store, record("r1"), create, launch, on_unclaimed=release,
                                 orchestrations=NONE_STARTED)
    assert run.run_id == "r1" and launched == ["r1"]
    assert unclaimed == []  # released, the key would let a retry start a second run
    session = await store.get_session("s1")
    assert session is not None and session.active_run_id == "r1"
    await store.close()


async def test_a_create_whose_write_lands_after_its_failure_claims_nothing() -> None:
    """The create failed before its write landed (slower than its error): the start is closed in the run's place, the
    claim released, and the write landing afterwards finds that record - the session is not held by a run that
    nobody started. A refusal (busy, above) writes no such record: nothing of it is on its way."""
    store = await store_with_session()
    unclaimed = []

    async def create() -> RunRecord:
        raise AnswerLost("timed out; the write is still on its way")

    async def launch(run: RunRecord, submitting: Callable[[], None]) -> None:
        raise AssertionError("nothing is launched")

    async def release() -> None:
        unclaimed.append(True)

    with pytest.raises(AnswerLost):
        await create_and_start(store, record("r1"), create, launch, on_unclaimed=release,
                               orchestrations=NONE_STARTED)
    assert unclaimed == [True]
    late = await store.begin_run(record("r1"))  # the write on its way lands now
    assert late.status == "failed" and late.ordinal == 0
    session = await store.get_session("s1")
    assert session is not None and (session.active_run_id, session.run_count) == (None, 0)
    await store.close()


async def test_a_failed_create_that_cannot_be_checked_keeps_the_claim() -> None:
    store = await store_with_session()
    unclaimed = []

    async def create() -> RunRecord:
        await store.begin_run(record("r1"))
        await store.close()  # the store goes away: whether the run was written cannot be read
        raise AnswerLost("the write landed, its answer did not")

    async def launch(run: RunRecord, submitting: Callable[[], None]) -> None:
        raise AssertionError("nothing is launched when the run cannot be read")

    async def release() -> None:
        unclaimed.append(True)

    with pytest.raises(RuntimeError) as raised:  # the read's own error (the store is closed), after the create's
        await create_and_start(store, record("r1"), create, launch, on_unclaimed=release,
                               orchestrations=NONE_STARTED)
    assert isinstance(raised.value.__context__, AnswerLost)
    assert unclaimed == []  # whether a run exists is unknown: the claim stays (taken over only once abandoned)


async def test_a_start_whose_run_the_store_closed_in_its_place_is_not_launched() -> None:
    """`begin_run` returned the run closed as an unwritten start (Cosmos: its claim looked dead and was taken over
    before its own write came): nothing is launched, the key is given up, and the caller is told the session is busy."""
    store = await store_with_session()
    session = await store.get_session("s1")
    assert session is not None
    closed = unwritten_start(session, "late", datetime.now(UTC))
    unclaimed, launched = [], []

    async def create() -> RunRecord:
        return closed

    async def launch(run: RunRecord, submitting: Callable[[], None]) -> None:
        launched.append(run.run_id)

    async def release() -> None:
        unclaimed.append(True)

    with pytest.raises(ApiProblem) as refused:
        await create_and_start(store, record("late"), create, launch, on_unclaimed=release, orchestrations=NONE_STARTED)
    assert (refused.value.status, refused.value.code) == (409, "session_busy")
    assert launched == [] and unclaimed == [True]
    await store.close()


class Orchestrations:
    """The cancel's side of the Durable client: records the cancel events raised."""

    def __init__(self) -> None:
        self.cancelled: list[str] = []

    async def send_cancel(self, instance_id: str, reason: str, /) -> object:
        self.cancelled.append(instance_id)
        return None

    async def state(self, instance_id: str, /) -> None:  # pragma: no cover - only asked when an event is refused
        return None


def cached(cache: ConversationCache, run: RunRecord, etag: str | None) -> list[int] | None:
    found = cache.records(run.session_id, run.run_id, etag, after=-1, below=None)
    return None if found is None else [m.seq for m in found]


async def test_a_cancel_flagged_under_the_etag_it_read_keeps_the_runs_cached_conversation() -> None:
    """The flag is the only change (written under the ETag of the run the request read): the run's closing step still
    finds its conversation in this process's cache, and reads no messages."""
    store = await store_with_session()
    run = await store.begin_run(record("r1"))
    cache = ConversationCache()
    message = MessageRecord(session_id="s1", message_id="m1", seq=1, run_id="r1", role="user",
                            payload=Message(role="user", contents="hi").model_dump(mode="json"))
    cache.start("s1", "r1", run.etag, [message], below=2)
    orchestrations = Orchestrations()
    assert await cancel(store, orchestrations, run, "cancelled by the client", conversations=cache) is None
    flagged = await store.get_run("r1")
    assert flagged is not None and flagged.cancel_requested_at is not None and orchestrations.cancelled == ["r1"]
    assert cached(cache, flagged, flagged.etag) == [1]
    await store.close()


async def test_a_cancel_of_a_run_changed_since_it_was_read_is_flagged_and_the_cache_left_behind() -> None:
    """A run changed after the request read it (a rewind, say) is read again and flagged all the same; its cached
    conversation is not carried over the change (the next step notices the other ETag and reads the session)."""
    store = await store_with_session()
    run = await store.begin_run(record("r1"))
    cache = ConversationCache()
    cache.start("s1", "r1", run.etag, [], below=1)
    await store.update_run("r1", metadata={"changed": True})  # after the cancel request read `run`
    assert await cancel(store, Orchestrations(), run, "cancelled by the client", conversations=cache) is None
    flagged = await store.get_run("r1")
    assert flagged is not None and flagged.cancel_requested_at is not None and flagged.metadata == {"changed": True}
    assert cached(cache, flagged, flagged.etag) is None
    await store.close()


async def test_two_cancels_of_the_same_run_keep_the_first_requests_time() -> None:
    """Two cancel requests read the run before either flagged it: the second's ETag-conditioned flag fails, and it
    reads the run again. The run is flagged once, at the first request's time (the steps and the run's record show
    when the cancel was asked); the second request does not move it."""
    store = await store_with_session()
    run = await store.begin_run(record("r1"))
    orchestrations = Orchestrations()
    assert await cancel(store, orchestrations, run, "cancelled by the client") is None
    first = (await store.get_run("r1")).cancel_requested_at
    assert await cancel(store, orchestrations, run, "cancelled by the client") is None  # `run` as read before
    flagged = await store.get_run("r1")
    assert first is not None and flagged.cancel_requested_at == first
    assert orchestrations.cancelled == ["r1", "r1"]  # both still ring the run's cancel event
    await store.close()


async def test_a_cancel_of_a_run_that_finished_since_it_was_read_does_not_flag_the_finished_run() -> None:
    """The run finished between the cancel request's read and its flag: the finished run is not marked as cancel
    requested after the fact (its record keeps the outcome it ended with)."""
    store = await store_with_session()
    run = await store.begin_run(record("r1"))
    await store.finish_run("r1", "completed", output={"text": "done"})
    await cancel(store, Orchestrations(), run, "cancelled by the client")
    finished = await store.get_run("r1")
    assert (finished.status, finished.cancel_requested_at) == ("completed", None)
    await store.close()


class EverChangingStore(SqliteSessionStore):
    """A run that another writer changes (a real write) just before each of the cancel's conditional writes."""

    async def update_run(self, run_id, **changes):  # type: ignore[no-untyped-def]
        if changes.get("if_match") is not None:
            await super().update_run(run_id, metadata={"step": datetime.now(UTC).isoformat()})
        return await super().update_run(run_id, **changes)


async def test_a_cancel_of_a_run_that_keeps_changing_answers_503_and_rings_nothing() -> None:
    """The run changed under every one of the cancel's ETag-conditioned writes: a passing state, answered 503
    `run_busy` with `Retry-After` (it was a 500), nothing flagged and no cancel event sent."""
    store = EverChangingStore(":memory:")
    await store.create_session("s1", "helper")
    run = await store.begin_run(record("r1"))
    orchestrations = Orchestrations()
    with pytest.raises(ApiProblem) as refused:
        await cancel(store, orchestrations, run, "cancelled by the client")
    assert (refused.value.status, refused.value.code, refused.value.headers) == (503, "run_busy", {"Retry-After": "1"})
    assert (await store.get_run("r1")).cancel_requested_at is None and orchestrations.cancelled == []
    await store.close()


async def test_a_run_whose_orchestration_started_though_its_start_failed_is_answered_as_started() -> None:
    """The host took the start, its answer was lost: the run is not abandoned (a retry would run the turn again)."""
    store = await store_with_session()

    async def launch(run: RunRecord, submitting: Callable[[], None]) -> None:
        raise TimeoutError("the start's answer was lost")

    run = await create_and_start(store, record("r1"), lambda: store.begin_run(record("r1")), launch,
                                 orchestrations=TaskHub("r1"))
    assert run.run_id == "r1"
    stored = await store.get_run("r1")
    assert stored is not None and not stored.finished
    await store.close()


async def test_when_the_orchestration_cannot_be_read_either_the_run_is_abandoned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Unknown whether it started: given up as before (an orchestration starting late finds it closed)."""
    store = await store_with_session()

    async def launch(run: RunRecord, submitting: Callable[[], None]) -> None:
        raise TimeoutError("the start's answer was lost")

    with pytest.raises(TimeoutError):
        await create_and_start(store, record("r1"), lambda: store.begin_run(record("r1")), launch,
                               orchestrations=TaskHub("r1", unreadable=True))
    abandoned = await store.get_run("r1")
    assert abandoned is not None and abandoned.error == {"code": "start_failed", "message": "could not start"}
    assert "could not tell whether run r1 started after its start failed" in caplog.text
    await store.close()
