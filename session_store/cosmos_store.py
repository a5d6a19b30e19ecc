"""The production ``SessionStore`` on Azure Cosmos DB (NoSQL API, ``azure-cosmos`` aio client).

Hot paths are point reads and single-partition queries (``c.sessionId = @s`` in the SQL *and* ``partition_key=``);
a run or approval id resolves to its session through a point read of the ``lookup`` container (a run that created
its session, named after it, needs no lookup item: its id is its partition). Writes use
deterministic ids (upsert or create-if-absent), and the two races (one active run per session, one decision per
approval) are settled by ETag conditions. Data model: ``cosmos_admin.py`` and ``README.md``.

One client per process: the store owns a ``LoopPortal`` thread whose event loop owns the aio client; every public
method runs there, so callers on any loop/thread can share the store (see ``portal.py``).
"""

from __future__ import annotations

import concurrent.futures
import functools
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from typing import Any, TypeVar

from . import cursor, rules
from .clock import Clock, system_clock
from .cosmos_admin import ensure_containers, make_client
from .cosmos_documents import from_item, lookup_id, lookup_item, to_item
from .cosmos_io import CosmosContainers, bounded_gather, translate_errors
from .errors import ConflictError, NotFoundError, StoreUnavailableError
from .limits import ensure_fits
from .portal import LoopPortal
from .records import (
    ApprovalRecord,
    ApprovalStatus,
    DecidedApprovalStatus,
    EffectRecord,
    JsonObject,
    MessageRecord,
    Page,
    QueuePosition,
    RunRecord,
    SessionRecord,
    SignalRecord,
    stamp,
)
from .settings import StoreSettings

T = TypeVar("T")
SIGNAL_TYPE = "signal"
SIGNAL_KEY_TYPE = "signal-key"  # a signal's reservation: the index its signal id takes (`append_signal`)
MAX_SIGNAL_ATTEMPTS = 1000
# ETag retry bound for read-modify-write loops; each retry means another writer won a round, so this is generous.
MAX_ETAG_ROUNDS = 50


def _run_prefix(approval_id: str) -> str | None:
    """The run id an approval id starts with ("<run id>:<call id>"), if it has that shape."""
    prefix, colon, _ = approval_id.partition(":")
    return prefix if colon and prefix else None


def _on_portal(fn: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., Coroutine[Any, Any, T]]:
    """Run the method on the store's loop thread, with SDK errors translated to store errors."""

    @functools.wraps(fn)
    async def wrapper(self: CosmosSessionStore, *args: Any, **kwargs: Any) -> T:
        return await self._portal.call(translate_errors(fn(self, *args, **kwargs)))

    return wrapper


class CosmosSessionStore:
    """``SessionStore`` on Cosmos DB. Build it with ``CosmosSessionStore.open(settings)`` (or ``open_store``)."""

    def __init__(
        self, settings: StoreSettings, clock: Clock, portal: LoopPortal, client: Any, credential: Any,
        containers: CosmosContainers,
    ) -> None:
        self._settings = settings
        self._ttl = settings.session_ttl_seconds
        self._clock = clock
        self._portal = portal
        self._client = client
        self._credential = credential
        self._db = containers

    @classmethod
    def open(cls, settings: StoreSettings, *, clock: Clock = system_clock, timeout: float = 60.0) -> CosmosSessionStore:
        """Connect, create the database/containers if missing, and return the store (blocking, start-up only)."""
        portal = LoopPortal("session-store-cosmos")

        async def setup() -> tuple[Any, Any, CosmosContainers]:
            client, credential = make_client(settings)
            try:
                return client, credential, CosmosContainers(await ensure_containers(client, settings))
            except BaseException:
                await client.close()
                if credential is not None:
                    await credential.close()
                raise

        try:
            client, credential, containers = portal.run_sync(setup(), timeout)
        except concurrent.futures.TimeoutError as exc:
            portal.close()
            endpoint = settings.cosmos_endpoint
            raise StoreUnavailableError(f"Cosmos DB at {endpoint} did not answer in {timeout}s") from exc
        except BaseException:
            portal.close()
            raise
        return cls(settings, clock, portal, client, credential, containers)

    # -- sessions -------------------------------------------------------------------------------------------

    async def _get_session(self, session_id: str) -> SessionRecord | None:
        item = await self._db.read("sessions", session_id, session_id)
        return None if item is None else from_item(SessionRecord, item)

    async def _replace(self, name: str, record: Any, etag: str | None) -> dict[str, Any] | None:
        return await self._db.replace(name, to_item(record, self._ttl), etag)

    @_on_portal
    async def create_session(
        self,
        session_id: str,
        agent: str,
        metadata: JsonObject | None = None,
        *,
        owner_id: str | None = None,
        owner_name: str | None = None,
        forked_from: JsonObject | None = None,
    ) -> SessionRecord:
        now = self._clock()
        record = SessionRecord(session_id=session_id, agent=agent, metadata=metadata or {}, created_at=now,
                               updated_at=now, owner_id=owner_id, owner_name=owner_name, forked_from=forked_from)
        ensure_fits("session", session_id, record)
        created = await self._db.create("sessions", to_item(record, self._ttl))
        if created is not None:
            return from_item(SessionRecord, created)
        existing = await self._get_session(session_id)
        if existing is None:  # deleted between our create and read: the caller may simply retry
            raise ConflictError(f"session {session_id!r} was deleted while being created")
        return existing

    @_on_portal
    async def get_session(self, session_id: str) -> SessionRecord | None:
        return await self._get_session(session_id)

    @_on_portal
    async def list_sessions(
        self,
        *,
        agent: str | None = None,
        owner_id: str | None = None,
        limit: int = 50,
        continuation: str | None = None,
    ) -> Page[SessionRecord]:
        # Cross-partition by nature (listing is not a hot path); paged with the SDK's continuation token.
        scope = f"sessions:{agent}" if owner_id is None else f"sessions:{agent}:{owner_id}"
        items, wrapped = await self._cross_partition_page(
            "sessions", scope, {"agent": agent, "owner_id": owner_id}, limit, continuation
        )
        return Page(items=[from_item(SessionRecord, i) for i in items], continuation=wrapped)

    async def _cross_partition_page(
        self, name: str, scope: str, equals: dict[str, Any], limit: int, continuation: str | None,
        extra_where: str = "", **extra_params: Any,
    ) -> tuple[list[Any], str | None]:
        """One page of ``name`` newest first, filtered on fields equal to the given values (``None``: no filter)."""
        token = cursor.decode(scope, continuation)["t"] if continuation else None
        clauses = [f"c.{field} = @{field}" for field, value in equals.items() if value is not None]
        params = {field: value for field, value in equals.items() if value is not None}
        if extra_where:
            clauses.append(extra_where)
        where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
        items, next_token = await self._db.query_page(
            name, f"SELECT * FROM c {where}ORDER BY c.createdEpoch DESC", page_size=limit, continuation=token,
            **params, **extra_params,
        )
        return items, cursor.encode(scope, {"t": next_token}) if next_token else None

    @_on_portal
    async def delete_session(self, session_id: str) -> bool:
        # Children first and the session item last, so an interrupted delete is finished by calling it again.
        existed = await self._get_session(session_id) is not None
        for name in ("messages", "runs", "approvals", "effects"):
            ids = await self._db.query(
                name, "SELECT VALUE c.id FROM c WHERE c.sessionId = @s", session_id, s=session_id
            )
            if name in ("runs", "approvals"):
                kind = name[:-1]
                await bounded_gather(self._db.delete("lookup", lookup_id(kind, i), lookup_id(kind, i)) for i in ids)
            await bounded_gather(self._db.delete(name, i, session_id) for i in ids)
        await self._db.delete("sessions", session_id, session_id)
        return existed

    # -- messages -------------------------------------------------------------------------------------------

    @_on_portal
    async def append_messages(self, session_id: str, records: Sequence[MessageRecord]) -> list[MessageRecord]:
        batch = list(records)
        rules.check_batch(session_id, batch)
        for record in batch:
            ensure_fits("message", record.message_id, record)
        now = self._clock()
        stored = [r.model_copy(update={"created_at": stamp(r.created_at, now)}) for r in batch]
        # Not one transaction (Cosmos batches cap at 100 items/2 MB), but each upsert is idempotent by id, so a
        # retried activity completes a partially written batch without duplicating anything.
        await bounded_gather(self._upsert_message(record) for record in stored)
        return stored

    async def append_to_open_run(
        self, session_id: str, run_id: str, records: Sequence[MessageRecord]
    ) -> tuple[RunRecord | None, list[MessageRecord] | None]:
        # A read, then the writes: Cosmos has no write conditional on another item (the run lives in its own
        # container), so a close landing between the two still lets this step's messages in.
        run = await self.get_run(run_id, session_id=session_id)
        if run is not None and run.finished:
            return run, None
        return run, await self.append_messages(session_id, records)

    async def _upsert_message(self, record: MessageRecord) -> None:
        if await self._db.upsert("messages", to_item(record, self._ttl)) is not None:
            return
        # The unique key /seq refused it: another message owns this seq.
        owners = await self._db.query(
            "messages", "SELECT VALUE c.id FROM c WHERE c.sessionId = @s AND c.seq = @q", record.session_id,
            s=record.session_id, q=record.seq,
        )
        raise rules.seq_conflict(record.session_id, record.seq, owners[0] if owners else "?", record.message_id)

    @_on_portal
    async def list_messages(
        self,
        session_id: str,
        *,
        after_seq: int | None = None,
        up_to_seq: int | None = None,
        run_id: str | None = None,
        limit: int = 100,
        continuation: str | None = None,
    ) -> Page[MessageRecord]:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        scope = cursor.message_scope(session_id, after_seq, up_to_seq, run_id)
        start = cursor.decode(scope, continuation)["after"] if continuation else after_seq
        sql = f"SELECT TOP {int(limit) + 1} * FROM c WHERE c.sessionId = @s"
        params: dict[str, Any] = {"s": session_id}
        for clause, name, value in ((" AND c.seq > @a", "a", start), (" AND c.seq <= @u", "u", up_to_seq),
                                    (" AND c.run_id = @r", "r", run_id)):
            if value is not None:
                sql, params[name] = sql + clause, value
        items = await self._db.query("messages", sql + " ORDER BY c.seq", session_id, **params)
        token = None
        if len(items) > limit:
            items = items[:limit]
            token = cursor.encode(scope, {"after": items[-1]["seq"]})
        return Page(items=[from_item(MessageRecord, i) for i in items], continuation=token)

    @_on_portal
    async def get_message(self, session_id: str, message_id: str) -> MessageRecord | None:
        item = await self._db.read("messages", message_id, session_id)
        return None if item is None else from_item(MessageRecord, item)

    @_on_portal
    async def count_messages(self, session_id: str, *, run_id: str | None = None) -> int:
        sql, params = "SELECT VALUE COUNT(1) FROM c WHERE c.sessionId = @s", {"s": session_id}
        if run_id is not None:
            sql, params["r"] = sql + " AND c.run_id = @r", run_id
        result = await self._db.query("messages", sql, session_id, **params)
        return int(result[0]) if result else 0

    @_on_portal
    async def last_seq(self, session_id: str) -> int | None:
        sql = "SELECT TOP 1 VALUE c.seq FROM c WHERE c.sessionId = @s ORDER BY c.seq DESC"
        result = await self._db.query("messages", sql, session_id, s=session_id)
        return result[0] if result else None

    # -- runs -----------------------------------------------------------------------------------------------

    async def _session_of(self, kind: str, key: str) -> str | None:
        """The session holding the run or approval `key`. A run without a lookup item is its own session's namesake
        (see `_needs_lookup`): the run's id is then the partition to read it from."""
        item = await self._db.read("lookup", lookup_id(kind, key), lookup_id(kind, key))
        if item is None:
            return key if kind == "run" else _run_prefix(key)
        return str(item["sessionId"])

    @staticmethod
    def _needs_lookup(run: RunRecord) -> bool:
        """A run in a session named after it (a run that created its session) is found without a lookup item: a
        5 RU write saved per such run, reads unchanged (the lookup miss then the run itself, as lookup then run)."""
        return run.session_id != run.run_id

    @staticmethod
    def _approval_needs_lookup(approval: ApprovalRecord) -> bool:
        """Likewise an approval of such a run whose id starts with "<run id>:" (the agent runtime's approval ids)."""
        return approval.session_id != approval.run_id or _run_prefix(approval.approval_id) != approval.run_id

    async def _get_run(self, run_id: str, session_id: str | None = None) -> RunRecord | None:
        """A caller that knows the run's session (an activity's `RunRef`, a record read earlier in the same request)
        passes it and saves the lookup read; a run in another session is then not found."""
        session_id = session_id or await self._session_of("run", run_id)
        if session_id is None:
            return None
        item = await self._db.read("runs", run_id, session_id)
        return None if item is None else from_item(RunRecord, item)

    async def _current_run(self, run_id: str, current: RunRecord | None, first_round: bool) -> RunRecord | None:
        """The run a read-modify-write starts from: the caller's `current` record in the first round (its ETag
        conditions the write, so a stale one only costs a second round), a fresh read after that."""
        if first_round and current is not None and current.run_id == run_id and current.etag:
            return current
        return await self._get_run(run_id, current.session_id if current is not None else None)

    async def _refresh_lookup(self, kind: str, key: str, session_id: str) -> None:
        """With a retention, a rewritten record's lookup item is written too, so both expire together; without one
        the lookup item (never changing: a record stays in its session) lives as long as the record already."""
        if self._ttl is not None:
            await self._db.upsert("lookup", lookup_item(kind, key, session_id, self._ttl))

    async def _save_run(self, run: RunRecord, etag: str | None) -> RunRecord | None:
        """Replace the run under ``etag`` (and refresh its lookup item's retention)."""
        saved = await self._replace("runs", run, etag)
        if saved is None:
            return None
        if self._needs_lookup(run):
            await self._refresh_lookup("run", run.run_id, run.session_id)
        return from_item(RunRecord, saved)

    @_on_portal
    async def begin_run(
        self,
        record: RunRecord,
        *,
        queue: QueuePosition | None = None,
        new_session: SessionRecord | None = None,
        after_run_count: int | None = None,
    ) -> RunRecord:
        ensure_fits("run", record.run_id, record)
        if new_session is not None:
            ensure_fits("session", new_session.session_id, new_session)
            started = await self._begin_in_new_session(record, new_session)
            if started is not None:
                return started
        for _ in range(MAX_ETAG_ROUNDS):
            existing = await self._db.read("runs", record.run_id, record.session_id)
            if existing is not None:  # a retry: make sure the lookup item exists too (an earlier try may have died)
                found = from_item(RunRecord, existing)
                if self._needs_lookup(record):
                    ttl = rules.retention_seconds(found, self._ttl)
                    await self._db.upsert("lookup", lookup_item("run", record.run_id, record.session_id, ttl))
                if rules.is_unwritten_start(found):  # closed in its place: a claim this call landed is given back
                    await self._release_closed_start(found)
                return found
            session = await self._get_session(record.session_id)
            if session is None:
                raise NotFoundError("session", record.session_id)
            if await self._released_ended_holder(session, record.run_id):
                continue
            claim = rules.claim_session(session, record, self._clock(), queue, after_run_count)
            if claim.session is not None and await self._replace("sessions", claim.session, session.etag) is None:
                continue  # another writer changed the session first: decide again on the fresh version
            # The session's claim and the run are two writes (two containers: no transaction spans them). A start
            # stopped between them leaves the session held by a run without a record, which a later claim closes and
            # releases (`_released_ended_holder`); its create-if-absent is what this create races.
            created = await self._create_run(claim.run)
            if created is None:  # a concurrent retry of this very run created it, or its start was closed meanwhile
                continue
            return from_item(RunRecord, created)
        raise ConflictError(f"session {record.session_id!r} kept changing; begin_run gave up")

    async def _create_run(self, run: RunRecord) -> dict[str, Any] | None:
        """Create the run's item if absent (``None``: it exists). Lookup first: a run item is never visible without
        the index that resolves its id. An unwritten start's record expires after a day (`rules.retention_seconds`),
        and its lookup item with it - set only once the record has landed: until then the lookup item may be the
        run's own, written by its start, which must not expire with a record that never landed."""
        if not self._needs_lookup(run):
            return await self._db.create("runs", to_item(run, self._ttl))
        if not rules.is_unwritten_start(run):
            await self._db.upsert("lookup", lookup_item("run", run.run_id, run.session_id, self._ttl))
            return await self._db.create("runs", to_item(run, self._ttl))
        kept = rules.retention_seconds(run, self._ttl)
        await self._db.create("lookup", lookup_item("run", run.run_id, run.session_id, kept))
        created = await self._db.create("runs", to_item(run, self._ttl))
        if created is not None:
            await self._db.upsert("lookup", lookup_item("run", run.run_id, run.session_id, kept))
        return created

    async def _released_ended_holder(self, session: SessionRecord, claimant: str) -> bool:
        """Whether the session was held by a run that has ended, or whose start never wrote it, and was just released
        (decide again). Each store write is one operation, so a process stopped between two leaves such a holder:
        a start between its claim and its run's write, a `finish_run` between the run's write and the release.

        The holder's record is read once `rules.UNWRITTEN_HOLDER_AFTER` passed since the session last changed (never
        while it is younger: a start's run write may be on its way). Absent, it is created as a failed start
        (`rules.unwritten_start`) - create-if-absent, so either that or the start's own late write lands, never both.
        Finished, the holder is released under the session's ETag, handing the session on as `finish_run` would;
        a dead start's also gives back the position its claim counted (`rules.release_unwritten_start`).
        A free session, the success path, never gets here."""
        holder, now = session.active_run_id, self._clock()
        if holder is None or holder == claimant or not rules.unwritten_holder_may_be_closed(session, now):
            return False
        item = await self._db.read("runs", holder, session.session_id)
        if item is None:
            item = await self._create_run(rules.unwritten_start(session, holder, now)) or await self._db.read(
                "runs", holder, session.session_id
            )
        record = from_item(RunRecord, item) if item is not None else None
        if record is None or not record.finished:
            return False  # a run that holds its session
        await self._release_holder(session, record, now)  # a lost ETag race only means another writer came first
        return True

    async def _release_holder(self, session: SessionRecord, holder: RunRecord, now: datetime) -> bool:
        """Release the session of its finished `holder` (active or queued) under the session's ETag; False when the
        session changed since it was read. A dead start's claim also gives back the position it counted."""
        if rules.is_unwritten_start(holder):
            written = await self._has_run_at(session.session_id, session.run_count)
            released = rules.release_unwritten_start(session, holder.run_id, now, counted_run_written=written)
        else:
            released = rules.release_session(session, holder.run_id, now)
        return released is None or await self._replace("sessions", released, session.etag) is not None

    @_on_portal
    async def close_unwritten_start(self, planned: RunRecord) -> tuple[RunRecord, bool]:
        # The claim (a session write) and the run (a run write) are two operations: a failed `begin_run` may have
        # left the claim. The record first, so no late run write can land once the session is released.
        item = await self._create_run(rules.closed_start(planned, self._clock()))
        closed = item is not None
        item = item or await self._db.read("runs", planned.run_id, planned.session_id)
        if item is None:  # deleted with its session between the two calls: nothing of it is left
            raise ConflictError(f"run {planned.run_id!r} was deleted while its start was being closed")
        record = from_item(RunRecord, item)
        if rules.is_unwritten_start(record):
            await self._release_closed_start(record)
        return record, closed

    async def _release_closed_start(self, record: RunRecord) -> None:
        """The session no longer held (nor queued for) by a start closed in its place (failure paths only)."""
        for _ in range(MAX_ETAG_ROUNDS):
            session = await self._get_session(record.session_id)
            if session is None or record.run_id not in (session.active_run_id, *session.queued_run_ids):
                return
            if await self._release_holder(session, record, self._clock()):
                return
        raise ConflictError(f"session {record.session_id!r} kept changing; could not release run {record.run_id!r}")

    async def _has_run_at(self, session_id: str, ordinal: int) -> bool:
        """Whether a run of the session holds position `ordinal` (read only to close a dead start's claim)."""
        sql = "SELECT TOP 1 c.id FROM c WHERE c.sessionId = @s AND c.ordinal = @o"
        return bool(await self._db.query("runs", sql, session_id, s=session_id, o=ordinal))

    async def _begin_in_new_session(self, record: RunRecord, session: SessionRecord) -> RunRecord | None:
        """Three writes (the session created already held by the run, the lookup item, the run) instead of the
        claim's five operations (run and session reads, session replace). ``None``: the session exists and this run
        holds it (a retry of this very call), which the ordinary claim then completes."""
        now = self._clock()
        claim = rules.claim_session(rules.new_session(session, now), record, now)
        if claim.session is None or await self._db.create("sessions", to_item(claim.session, self._ttl)) is None:
            existing = await self._get_session(record.session_id)
            if existing is not None and existing.active_run_id == record.run_id:
                return None
            raise ConflictError(f"session {record.session_id!r} exists already")
        created = await self._create_run(claim.run)
        if created is None:  # a concurrent retry of this very call created it
            return None
        return from_item(RunRecord, created)

    async def _run_and_session(self, run_id: str) -> tuple[RunRecord, SessionRecord]:
        """The run and its session as they are now (each read-modify-write round starts from these)."""
        run = await self._get_run(run_id)
        if run is None:
            raise NotFoundError("run", run_id)
        session = await self._get_session(run.session_id)
        if session is None:
            raise NotFoundError("session", run.session_id)
        return run, session

    @_on_portal
    async def take_turn(self, run_id: str) -> RunRecord | None:
        # The run first, then the session's count: a retry after a crash in between finds the run's ordinal and
        # brings the count up to it (rules.take_turn), so no later run can get the same position.
        for _ in range(MAX_ETAG_ROUNDS):
            run, session = await self._run_and_session(run_id)
            if session.active_run_id != run_id and await self._released_ended_holder(session, run_id):
                continue  # e.g. handed a queued run that was never written (finish_run cannot tell it from a slow one)
            turn = rules.take_turn(session, run, self._clock())
            if turn.run is not None:
                saved = await self._save_run(turn.run, run.etag)
                if saved is None:
                    continue
                run = saved
            if turn.session is not None and await self._replace("sessions", turn.session, session.etag) is None:
                continue
            return run if turn.granted else None
        raise ConflictError(f"run {run_id!r} kept changing; take_turn gave up")

    @_on_portal
    async def get_run(self, run_id: str, *, session_id: str | None = None) -> RunRecord | None:
        return await self._get_run(run_id, session_id)

    @_on_portal
    async def update_run(
        self, run_id: str, *, if_match: str | None = None, current: RunRecord | None = None, **changes: Any
    ) -> RunRecord:
        for round_ in range(MAX_ETAG_ROUNDS):
            run = await self._current_run(run_id, current, round_ == 0)
            if run is None:
                raise NotFoundError("run", run_id)
            if if_match is not None and run.etag != if_match:
                raise ConflictError(f"run {run_id!r} changed since it was read (etag mismatch)")
            updated = rules.apply_run_changes(run, changes, self._clock())
            ensure_fits("run", run_id, updated)
            saved = await self._save_run(updated, run.etag)
            if saved is not None:
                return saved
        raise ConflictError(f"run {run_id!r} kept changing; update_run gave up")

    @_on_portal
    async def finish_run(
        self,
        run_id: str,
        status: str,
        *,
        output: JsonObject | None = None,
        error: JsonObject | None = None,
        usage: JsonObject | None = None,
        current: RunRecord | None = None,
    ) -> RunRecord:
        for round_ in range(MAX_ETAG_ROUNDS):
            run = await self._current_run(run_id, current, round_ == 0)
            if run is None:
                raise NotFoundError("run", run_id)
            finished = rules.finish(run, status, output, error, usage, self._clock())
            if finished is not None:
                ensure_fits("run", run_id, finished)
                saved = await self._save_run(finished, run.etag)
                if saved is None:
                    continue
                run = saved
            await self._release_session(run)
            return run
        raise ConflictError(f"run {run_id!r} kept changing; finish_run gave up")

    async def _release_session(self, run: RunRecord) -> None:
        for _ in range(MAX_ETAG_ROUNDS):
            session = await self._get_session(run.session_id)
            released = None if session is None else rules.release_session(session, run.run_id, self._clock())
            if released is None or await self._replace("sessions", released, session.etag) is not None:
                return
        raise ConflictError(f"session {run.session_id!r} kept changing; could not release run {run.run_id!r}")

    @_on_portal
    async def record_run_tools(
        self,
        run_id: str,
        tools: Sequence[JsonObject],
        skipped: Sequence[JsonObject] = (),
        skipped_servers: Sequence[JsonObject] = (),
    ) -> RunRecord:
        for _ in range(MAX_ETAG_ROUNDS):
            run = await self._get_run(run_id)
            if run is None:
                raise NotFoundError("run", run_id)
            updated = rules.record_tools(run, list(tools), self._clock(), list(skipped), list(skipped_servers))
            if updated is None:
                return run  # recorded before (a retried discovery): the first list stays
            ensure_fits("run", run_id, updated)
            saved = await self._save_run(updated, run.etag)
            if saved is not None:
                return saved
        raise ConflictError(f"run {run_id!r} kept changing; record_run_tools gave up")

    @_on_portal
    async def reopen_run(self, run_id: str, rewind: JsonObject, *, after_rewinds: int | None = None) -> RunRecord:
        # Two containers, so two writes: the run first (its ETag lets exactly one of concurrent rewinds open it), then
        # the session's claim. A host killed in between leaves the run open and the session free (a new run may
        # begin); the same rewind sent again claims the session or, when a new run took it, fails the run again
        # (rules.reopen). Claiming first left the session held by a failed run that nothing would release.
        for _ in range(MAX_ETAG_ROUNDS):
            run, session = await self._run_and_session(run_id)
            reopened = rules.reopen(session, run, rewind, self._clock(), after_rewinds)
            opened = run
            if reopened.run is not None:
                ensure_fits("run", run_id, reopened.run)
                saved = await self._save_run(reopened.run, run.etag)
                if saved is None:
                    continue
                if reopened.refused is not None:
                    raise reopened.refused
                opened = saved
            if reopened.session is None or await self._replace("sessions", reopened.session, session.etag) is not None:
                return opened
            if opened is not run:  # the session changed since it was read: the run as it was, then decide again
                await self._replace("runs", run, opened.etag)
        raise ConflictError(f"run {run_id!r} kept changing; reopen_run gave up")

    @_on_portal
    async def list_runs(self, session_id: str) -> list[RunRecord]:
        return await self._runs_of(session_id)

    async def _runs_of(self, session_id: str) -> list[RunRecord]:
        sql = "SELECT * FROM c WHERE c.sessionId = @s ORDER BY c.ordinal"
        return [from_item(RunRecord, i) for i in await self._db.query("runs", sql, session_id, s=session_id)]

    @_on_portal
    async def list_owner_runs(
        self,
        owner_id: str,
        *,
        status: str | None = None,
        agent: str | None = None,
        limit: int = 50,
        continuation: str | None = None,
    ) -> Page[RunRecord]:
        # Cross-partition (a caller's runs span their sessions); an owner filter keeps the result small.
        scope = f"owner-runs:{owner_id}:{status}:{agent}"
        items, wrapped = await self._cross_partition_page(
            "runs", scope, {"owner_id": owner_id, "status": status, "agent": agent}, limit, continuation
        )
        return Page(items=[from_item(RunRecord, i) for i in items], continuation=wrapped)

    @_on_portal
    async def list_branch_runs(self, branched_from: str, *, owner_id: str, limit: int = 10) -> list[RunRecord]:
        # Cross-partition (each branch is a session of its own): only a Responses create's retry asks.
        items, _ = await self._cross_partition_page(
            "runs", "branch-runs", {"branched_from": branched_from, "owner_id": owner_id}, limit, None
        )
        return [from_item(RunRecord, i) for i in items]

    # -- approvals ------------------------------------------------------------------------------------------

    @_on_portal
    async def list_decidable_approvals(
        self,
        keys: Sequence[str],
        *,
        status: ApprovalStatus | None = "pending",
        limit: int = 50,
        continuation: str | None = None,
    ) -> Page[ApprovalRecord]:
        # Cross-partition (an approver's inbox spans runs); ARRAY_CONTAINS per key over the record's decider keys.
        wanted = sorted(set(keys))
        if not wanted:
            return Page(items=[])
        scope = f"decidable:{status}:{','.join(wanted)}"
        matches = " OR ".join(f"ARRAY_CONTAINS(c.decider_keys, @k{i})" for i in range(len(wanted)))
        items, wrapped = await self._cross_partition_page(
            "approvals", scope, {"status": status}, limit, continuation, extra_where=f"({matches})",
            **{f"k{i}": key for i, key in enumerate(wanted)},
        )
        return Page(items=[from_item(ApprovalRecord, i) for i in items], continuation=wrapped)

    async def _get_approval(self, approval_id: str, session_id: str | None = None) -> ApprovalRecord | None:
        """`session_id` as for `_get_run`: known to the caller, it saves the lookup read."""
        session_id = session_id or await self._session_of("approval", approval_id)
        if session_id is None:
            return None
        item = await self._db.read("approvals", approval_id, session_id)
        return None if item is None else from_item(ApprovalRecord, item)

    async def _put_approval(self, record: ApprovalRecord) -> ApprovalRecord:
        fresh = record.model_copy(update={"created_at": stamp(record.created_at, self._clock())})
        created = await self._db.create("approvals", to_item(fresh, self._ttl))
        stored = created or await self._db.read("approvals", record.approval_id, record.session_id)
        if stored is None:
            raise ConflictError(f"approval {record.approval_id!r} was deleted while being created")
        if self._approval_needs_lookup(record):
            await self._db.upsert("lookup", lookup_item("approval", record.approval_id, record.session_id, self._ttl))
        return from_item(ApprovalRecord, stored)

    @_on_portal
    async def put_approvals(self, records: Sequence[ApprovalRecord]) -> list[ApprovalRecord]:
        batch = list(records)
        for record in batch:
            ensure_fits("approval", record.approval_id, record)
        return await bounded_gather(self._put_approval(record) for record in batch)

    @_on_portal
    async def get_approval(self, approval_id: str, *, session_id: str | None = None) -> ApprovalRecord | None:
        return await self._get_approval(approval_id, session_id)

    @_on_portal
    async def list_approvals(
        self,
        *,
        run_id: str | None = None,
        session_id: str | None = None,
        status: ApprovalStatus | None = None,
    ) -> list[ApprovalRecord]:
        if run_id is None and session_id is None:
            raise ValueError("list_approvals needs a run_id or a session_id")
        if session_id is None:
            session_id = await self._session_of("run", run_id)
            if session_id is None:
                return []
        sql, params = "SELECT * FROM c WHERE c.sessionId = @s", {"s": session_id}
        for clause, name, value in ((" AND c.run_id = @r", "r", run_id), (" AND c.status = @st", "st", status)):
            if value is not None:
                sql, params[name] = sql + clause, value
        items = await self._db.query("approvals", sql, session_id, **params)
        items.sort(key=lambda i: (i.get("createdEpoch", 0), i["id"]))  # two-key ORDER BY needs a composite index
        return [from_item(ApprovalRecord, i) for i in items]

    @_on_portal
    async def decide_approval(
        self,
        approval_id: str,
        status: DecidedApprovalStatus,
        *,
        decided_by: str | None = None,
        decided_by_name: str | None = None,
        reason: str | None = None,
        edited_arguments: JsonObject | None = None,
        decided_at: datetime | None = None,
        current: ApprovalRecord | None = None,
    ) -> ApprovalRecord:
        for round_ in range(MAX_ETAG_ROUNDS):
            if round_ == 0 and current is not None and current.approval_id == approval_id and current.etag:
                approval: ApprovalRecord | None = current  # its ETag conditions the write: stale costs a round
            else:
                approval = await self._get_approval(approval_id, current.session_id if current else None)
            if approval is None:
                raise NotFoundError("approval", approval_id)
            decided = rules.decide(
                approval, status, decided_by, reason, edited_arguments, decided_at or self._clock(), decided_by_name
            )
            ensure_fits("approval", approval_id, decided)
            saved = await self._replace("approvals", decided, approval.etag)
            if saved is not None:
                if self._approval_needs_lookup(approval):
                    await self._refresh_lookup("approval", approval_id, approval.session_id)
                return from_item(ApprovalRecord, saved)
        raise ConflictError(f"approval {approval_id!r} kept changing; decide_approval gave up")

    @_on_portal
    async def escalate_approval(
        self,
        approval_id: str,
        to: str,
        *,
        expires_at: datetime,
        escalated_at: datetime | None = None,
        to_keys: Sequence[str] = (),
    ) -> ApprovalRecord:
        for _ in range(MAX_ETAG_ROUNDS):
            approval = await self._get_approval(approval_id)
            if approval is None:
                raise NotFoundError("approval", approval_id)
            escalated = rules.escalate(approval, to, expires_at, escalated_at or self._clock(), to_keys)
            if escalated is approval:
                return approval
            saved = await self._replace("approvals", escalated, approval.etag)
            if saved is not None:
                return from_item(ApprovalRecord, saved)
        raise ConflictError(f"approval {approval_id!r} kept changing; escalate_approval gave up")

    # -- effects --------------------------------------------------------------------------------------------

    @_on_portal
    async def record_effect(
        self, session_id: str, key: str, kind: str, payload: JsonObject
    ) -> tuple[EffectRecord, bool]:
        record = EffectRecord(session_id=session_id, key=key, kind=kind, payload=payload, created_at=self._clock())
        ensure_fits("effect", key, record)
        created = await self._db.create("effects", to_item(record, self._ttl))
        if created is not None:
            return from_item(EffectRecord, created), True
        existing = await self._db.read("effects", key, session_id)
        if existing is None:
            raise ConflictError(f"effect {key!r} was deleted while being recorded")
        return from_item(EffectRecord, existing), False

    @_on_portal
    async def list_effects(self, session_id: str, *, kind: str | None = None) -> list[EffectRecord]:
        sql, params = "SELECT * FROM c WHERE c.sessionId = @s AND c.type = @t", {"s": session_id, "t": "effect"}
        if kind is not None:
            sql, params["k"] = sql + " AND c.kind = @k", kind
        items = await self._db.query("effects", sql, session_id, **params)
        items.sort(key=lambda i: (i.get("createdEpoch", 0), i["id"]))
        return [from_item(EffectRecord, i) for i in items]

    @_on_portal
    async def get_effect(self, session_id: str, key: str) -> EffectRecord | None:
        item = await self._db.read("effects", key, session_id)
        return from_item(EffectRecord, item) if item is not None and item.get("type") == "effect" else None

    # -- signals (items of the effects container, type "signal", id "signal:<name>:<index>") --------------------

    _SIGNALS = "FROM c WHERE c.sessionId = @s AND c.type = @t AND c.name = @n"

    async def _last_signal_index(self, session_id: str, name: str) -> int:
        found = await self._db.query(
            "effects", f"SELECT VALUE MAX(c['index']) {self._SIGNALS}", session_id, s=session_id, t=SIGNAL_TYPE, n=name
        )
        return int(found[0]) if found and found[0] is not None else 0  # an empty MAX is undefined: no row

    @_on_portal
    async def append_signal(self, session_id: str, name: str, signal_id: str, payload: Any) -> SignalRecord:
        """Once per `signal_id`. Its reservation (an item with the deterministic id `signal-key:<name>:<signal_id>`)
        names the index it takes and is written first: an append repeated after a lost answer, or the SDK's retry of
        a create that landed (a 409 on its own item), finds the signal there instead of appending a copy, which a
        workflow would consume twice. The index is claimed by creating the signal's item with the deterministic id
        `signal:<name>:<index>`: of two concurrent appends that picked the same index exactly one is created; the
        other moves its reservation to the following index (ETag-conditioned) and tries there."""
        signal = SignalRecord(session_id=session_id, name=name, index=1, signal_id=signal_id, payload=payload)
        ensure_fits("signal", signal_id, signal)  # before anything is written: a signal too large reserves nothing
        reservation = await self._reserve_signal(
            session_id, name, signal_id, 1 + await self._last_signal_index(session_id, name)
        )
        for _ in range(MAX_SIGNAL_ATTEMPTS):
            index = int(reservation["index"])
            record = signal.model_copy(update={"index": index, "created_at": self._clock()})
            item = record.model_dump(mode="json")
            item.update(id=f"{SIGNAL_TYPE}:{name}:{index}", sessionId=session_id, type=SIGNAL_TYPE,
                        createdEpoch=record.created_at.timestamp() if record.created_at else 0)
            if self._ttl is not None:
                item["ttl"] = self._ttl
            if await self._db.create("effects", item) is not None:
                return record
            taken = await self._db.read("effects", item["id"], session_id)
            if taken is not None and taken.get("signal_id") == signal_id:
                return from_item(SignalRecord, taken)  # appended already (an earlier try, or the SDK's own retry)
            reservation = await self._move_reservation(reservation, index + 1)
        raise ConflictError(f"signal {name!r} of session {session_id!r}: too many concurrent appends")

    async def _reserve_signal(self, session_id: str, name: str, signal_id: str, index: int) -> dict[str, Any]:
        """The signal's reservation: created for `index`, or the one an earlier append of it made (its index)."""
        item: dict[str, Any] = {
            "id": f"{SIGNAL_KEY_TYPE}:{name}:{signal_id}", "sessionId": session_id, "type": SIGNAL_KEY_TYPE,
            "name": name, "signal_id": signal_id, "index": index,
        }
        if self._ttl is not None:
            item["ttl"] = self._ttl
        for _ in range(MAX_ETAG_ROUNDS):
            if (created := await self._db.create("effects", item)) is not None:
                return created
            if (existing := await self._db.read("effects", item["id"], session_id)) is not None:
                return existing
            # It expired (or its session was deleted) between the create and the read: create it again.
        raise ConflictError(f"signal {signal_id!r} of session {session_id!r}: its reservation keeps vanishing")

    async def _move_reservation(self, reservation: dict[str, Any], index: int) -> dict[str, Any]:
        """The reservation moved to `index` (another signal took its index), or, when a concurrent append of the same
        signal moved it first (its ETag changed), the reservation as that append left it."""
        moved = {k: v for k, v in reservation.items() if not k.startswith("_")} | {"index": index}
        if (replaced := await self._db.replace("effects", moved, reservation["_etag"])) is not None:
            return replaced
        current = await self._db.read("effects", reservation["id"], reservation["sessionId"])
        if current is None:
            raise ConflictError(f"signal {reservation['signal_id']!r}: its reservation vanished while appending it")
        return current

    @_on_portal
    async def list_signals(
        self, session_id: str, name: str, *, from_index: int = 1, limit: int = 100
    ) -> list[SignalRecord]:
        sql = f"SELECT TOP @k * {self._SIGNALS} AND c['index'] >= @i ORDER BY c['index']"
        params = {"s": session_id, "t": SIGNAL_TYPE, "n": name, "i": from_index, "k": limit}
        items = await self._db.query("effects", sql, session_id, **params)
        return [from_item(SignalRecord, i) for i in items]

    # -- lifecycle ------------------------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the client (and credential) on its loop, then stop the loop thread. Idempotent."""
        if self._client is None:
            return
        client, credential, self._client = self._client, self._credential, None

        async def shutdown() -> None:
            await client.close()
            if credential is not None:
                await credential.close()

        await self._portal.call(shutdown())
        self._portal.close()
