"""The embedded ``SessionStore`` on SQLite (the default when no Cosmos endpoint is configured).

Threading (``sqlite_runner``): every write is one ``BEGIN IMMEDIATE`` transaction, which is what makes ``begin_run``
and ``decide_approval`` atomic, within this process and across processes alike (SQLite's write lock). Point operations
(a few records) run inline on the caller's thread when they need not wait for a lock; everything else, and whatever
would wait, runs on the store's one worker thread. The store is safe to share across threads and event loops.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Coroutine, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from . import cursor, rules
from .clock import Clock, system_clock
from .errors import ConflictError, NotFoundError, StoreError
from .limits import ensure_fits
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
from .sqlite_runner import RunOnThread, SqliteRunner
from .sqlite_schema import TABLES, connect

T = TypeVar("T")
LIVE = "(expires_at IS NULL OR expires_at > ?)"
SWEEP_INTERVAL_SECONDS = 60.0
UNWRITTEN_SWEEP_INTERVAL_SECONDS = 3600.0
# A larger batch of messages or approvals is written on the worker thread; a list that reads more goes there too.
INLINE_BATCH_BYTES = 256 * 1024
OWNER_OF_DOC = "json_extract(doc, '$.owner_id')"
BRANCHED_FROM_OF_DOC = "json_extract(doc, '$.branched_from')"
SIGNAL_ID_OF_DOC = "json_extract(doc, '$.signal_id')"
# Epoch seconds of the record's ISO creation time (julianday parses the fractions and the zone correctly).
CREATED_OF_DOC = "((julianday(json_extract(doc, '$.created_at')) - 2440587.5) * 86400.0)"
R = TypeVar("R", ApprovalRecord, RunRecord)


def _page(rows: list[Any], limit: int, scope: str, model: type[R]) -> Page[R]:
    """A page from rows of (doc, sort value, id) fetched with LIMIT limit + 1 (the extra row means: more)."""
    token = None
    if len(rows) > limit:
        rows = rows[:limit]
        token = cursor.encode(scope, {"c": rows[-1][1], "i": rows[-1][2]})
    return Page(items=[model.model_validate_json(r[0]) for r in rows], continuation=token)


def _etag() -> str:
    return uuid.uuid4().hex


class _Transaction:
    """`with store._tx() as conn:` - BEGIN IMMEDIATE, then COMMIT, or ROLLBACK when the block raises. (A class, not a
    generator context manager: every store write opens one, and the generator's three extra calls cost more.)"""

    __slots__ = ("_conn", "_runner")

    def __init__(self, conn: sqlite3.Connection, runner: SqliteRunner) -> None:
        self._conn = conn
        self._runner = runner

    def __enter__(self) -> sqlite3.Connection:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise self._runner.begin_failed(exc) from exc
        return self._conn

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if exc_type is not None:
            self._conn.execute("ROLLBACK")
            return  # the exception goes on
        self._conn.execute("COMMIT")
        self._runner.committed()


class SqliteSessionStore:
    """``SessionStore`` on one SQLite file (``:memory:`` allowed). See ``protocol.py`` for the contract."""

    def __init__(
        self, path: str, *, ttl_seconds: int | None = None, clock: Clock = system_clock, inline: bool = True
    ) -> None:
        """`inline`: point operations may run on the caller's thread (`sqlite_runner`); False sends every operation
        to the store's thread."""
        self._ttl = ttl_seconds
        self._clock = clock
        self._runner = SqliteRunner(path, connect, inline=inline)
        # Without a retention only unwritten starts' records expire, a day on: the first sweep can wait its hour.
        self._last_sweep = float("-inf") if ttl_seconds is not None else clock().timestamp()
        self._closed = False

    # -- plumbing -------------------------------------------------------------------------------------------

    @property
    def _conn(self) -> sqlite3.Connection:
        """The connection of the operation running on this thread (inline or the worker's)."""
        return self._runner.conn

    # The three below hand back the runner's coroutine for the caller to await (no coroutine of their own around it:
    # one per store operation).

    def _run(self, fn: Callable[..., T], *args: Any) -> Coroutine[Any, Any, T]:
        """On the worker thread: lists, counts, deletes (work that grows with the data)."""
        return self._runner.run(fn, *args)

    def _point(self, fn: Callable[[], T]) -> Coroutine[Any, Any, T]:
        """A point operation: inline unless it would wait for a lock or sweep (`sqlite_runner`)."""
        return self._runner.point(fn)

    def _batch(self, fn: Callable[[], T], size: int) -> Coroutine[Any, Any, T]:
        """A batch of records: a point operation up to `INLINE_BATCH_BYTES` of JSON, else on the worker thread."""
        return self._point(fn) if size <= INLINE_BATCH_BYTES else self._run(fn)

    def _bounded_rows(self, rows: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """The rows of a list whose first column is a record's JSON. Inline, reading past `INLINE_BATCH_BYTES`
        characters of it stops (`RunOnThread`: the list runs again on the worker thread), so a list read inline costs
        about what a batch written inline does. Only for a query whose rows stream in order from an index (no sort
        first): then what is read is what is returned."""
        fetched, size = [], 0
        for row in rows:
            size += len(row[0])
            if size > INLINE_BATCH_BYTES and self._runner.inline:
                raise RunOnThread
            fetched.append(row)
        return fetched

    def _tx(self) -> _Transaction:
        return _Transaction(self._conn, self._runner)

    def _now(self) -> datetime:
        return self._clock()

    def _expiry(self, now: datetime, ttl_seconds: int | None = None) -> float | None:
        ttl = self._ttl if ttl_seconds is None else ttl_seconds
        return None if ttl is None else now.timestamp() + ttl

    def _maybe_sweep(self, conn: sqlite3.Connection, now: datetime) -> None:
        """Delete expired rows now and then (reads already ignore them; this only reclaims space). Without a
        retention only the records of unwritten starts expire (`rules.retention_seconds`): swept hourly."""
        interval = SWEEP_INTERVAL_SECONDS if self._ttl is not None else UNWRITTEN_SWEEP_INTERVAL_SECONDS
        if now.timestamp() - self._last_sweep < interval:
            return
        if self._runner.inline:
            raise RunOnThread  # its work grows with what expired
        self._last_sweep = now.timestamp()
        for table in TABLES:
            conn.execute(f"DELETE FROM {table} WHERE expires_at IS NOT NULL AND expires_at <= ?", (now.timestamp(),))

    @staticmethod
    def _one(conn: sqlite3.Connection, sql: str, *params: Any) -> str | None:
        row = conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    # -- sessions -------------------------------------------------------------------------------------------

    def _get_session(self, conn: sqlite3.Connection, session_id: str, now: datetime) -> SessionRecord | None:
        doc = self._one(conn, f"SELECT doc FROM sessions WHERE session_id = ? AND {LIVE}", session_id, now.timestamp())
        return None if doc is None else SessionRecord.model_validate_json(doc)

    def _put_session(self, conn: sqlite3.Connection, session: SessionRecord, now: datetime) -> SessionRecord:
        session = session.model_copy(update={"etag": _etag()})
        conn.execute(
            "INSERT OR REPLACE INTO sessions (session_id, agent, created_at, etag, expires_at, doc)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (session.session_id, session.agent, session.created_at.timestamp(), session.etag,
             self._expiry(now), session.model_dump_json()),
        )
        return session

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
        record = SessionRecord(
            session_id=session_id, agent=agent, metadata=metadata or {}, owner_id=owner_id, owner_name=owner_name,
            forked_from=forked_from,
        )
        ensure_fits("session", session_id, record)

        def op() -> SessionRecord:
            now = self._now()
            with self._tx() as conn:
                self._maybe_sweep(conn, now)
                existing = self._get_session(conn, session_id, now)
                if existing is not None:
                    return existing
                return self._put_session(conn, record.model_copy(update={"created_at": now, "updated_at": now}), now)

        return await self._point(op)

    async def get_session(self, session_id: str) -> SessionRecord | None:
        return await self._point(lambda: self._get_session(self._conn, session_id, self._now()))

    async def list_sessions(
        self,
        *,
        agent: str | None = None,
        owner_id: str | None = None,
        limit: int = 50,
        continuation: str | None = None,
    ) -> Page[SessionRecord]:
        scope = f"sessions:{agent}" if owner_id is None else f"sessions:{agent}:{owner_id}"
        position = cursor.decode(scope, continuation) if continuation else None

        def op() -> Page[SessionRecord]:
            sql, params = f"SELECT doc, created_at, session_id FROM sessions WHERE {LIVE}", [self._now().timestamp()]
            if agent is not None:
                sql, params = sql + " AND agent = ?", [*params, agent]
            if owner_id is not None:
                sql, params = sql + f" AND {OWNER_OF_DOC} = ?", [*params, owner_id]
            if position is not None:
                sql += " AND (created_at < ? OR (created_at = ? AND session_id > ?))"
                params += [position["c"], position["c"], position["i"]]
            rows = self._conn.execute(sql + " ORDER BY created_at DESC, session_id LIMIT ?", [*params, limit + 1])
            rows = rows.fetchall()
            token = None
            if len(rows) > limit:
                rows = rows[:limit]
                token = cursor.encode(scope, {"c": rows[-1][1], "i": rows[-1][2]})
            return Page(items=[SessionRecord.model_validate_json(r[0]) for r in rows], continuation=token)

        return await self._run(op)

    async def delete_session(self, session_id: str) -> bool:
        def op() -> bool:
            now = self._now()
            with self._tx() as conn:
                existed = self._get_session(conn, session_id, now) is not None
                for table in TABLES:
                    conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
                return existed

        return await self._run(op)

    # -- messages -------------------------------------------------------------------------------------------

    async def append_messages(self, session_id: str, records: Sequence[MessageRecord]) -> list[MessageRecord]:
        batch, size = _checked_batch(session_id, records)

        def op() -> list[MessageRecord]:
            now = self._now()
            with self._tx() as conn:
                return self._insert_messages(conn, session_id, batch, now)

        return await self._batch(op, size)

    async def append_to_open_run(
        self, session_id: str, run_id: str, records: Sequence[MessageRecord]
    ) -> tuple[RunRecord | None, list[MessageRecord] | None]:
        batch, size = _checked_batch(session_id, records)

        def op() -> tuple[RunRecord | None, list[MessageRecord] | None]:
            now = self._now()
            with self._tx() as conn:  # one transaction: no close can land between the check and the write
                run = self._get_run(conn, run_id, now)
                if run is not None and run.session_id != session_id:
                    run = None
                if run is not None and run.finished:
                    return run, None
                return run, self._insert_messages(conn, session_id, batch, now)

        return await self._batch(op, size)

    def _insert_messages(
        self, conn: sqlite3.Connection, session_id: str, batch: list[MessageRecord], now: datetime
    ) -> list[MessageRecord]:
        stored = [r.model_copy(update={"created_at": stamp(r.created_at, now)}) for r in batch]
        self._maybe_sweep(conn, now)
        for record in stored:
            self._check_seq_free(conn, record, now)
            conn.execute(
                "INSERT OR REPLACE INTO messages (session_id, message_id, seq, run_id, expires_at, doc)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, record.message_id, record.seq, record.run_id, self._expiry(now), record.model_dump_json()),
            )
        return stored

    def _check_seq_free(self, conn: sqlite3.Connection, record: MessageRecord, now: datetime) -> None:
        row = conn.execute(
            "SELECT message_id, expires_at FROM messages WHERE session_id = ? AND seq = ?",
            (record.session_id, record.seq),
        ).fetchone()
        if row is None or row[0] == record.message_id:
            return
        if row[1] is not None and row[1] <= now.timestamp():  # an expired message no longer owns its seq
            conn.execute("DELETE FROM messages WHERE session_id = ? AND message_id = ?", (record.session_id, row[0]))
            return
        raise rules.seq_conflict(record.session_id, record.seq, row[0], record.message_id)

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

        def op() -> Page[MessageRecord]:
            sql = f"SELECT doc, seq FROM messages WHERE session_id = ? AND {LIVE}"
            params: list[Any] = [session_id, self._now().timestamp()]
            for clause, value in ((" AND seq > ?", start), (" AND seq <= ?", up_to_seq), (" AND run_id = ?", run_id)):
                if value is not None:
                    sql, params = sql + clause, [*params, value]
            rows = self._bounded_rows(self._conn.execute(sql + " ORDER BY seq LIMIT ?", [*params, limit + 1]))
            token = None
            if len(rows) > limit:
                rows = rows[:limit]
                token = cursor.encode(scope, {"after": rows[-1][1]})
            return Page(items=[MessageRecord.model_validate_json(r[0]) for r in rows], continuation=token)

        return await self._point(op)

    async def get_message(self, session_id: str, message_id: str) -> MessageRecord | None:
        def op() -> MessageRecord | None:
            doc = self._one(
                self._conn, f"SELECT doc FROM messages WHERE session_id = ? AND message_id = ? AND {LIVE}",
                session_id, message_id, self._now().timestamp(),
            )
            return None if doc is None else MessageRecord.model_validate_json(doc)

        return await self._point(op)

    async def count_messages(self, session_id: str, *, run_id: str | None = None) -> int:
        def op() -> int:
            sql = f"SELECT COUNT(*) FROM messages WHERE session_id = ? AND {LIVE}"
            params: list[Any] = [session_id, self._now().timestamp()]
            if run_id is not None:
                sql, params = sql + " AND run_id = ?", [*params, run_id]
            return int(self._conn.execute(sql, params).fetchone()[0])

        return await self._run(op)

    async def last_seq(self, session_id: str) -> int | None:
        sql = f"SELECT MAX(seq) FROM messages WHERE session_id = ? AND {LIVE}"
        return await self._point(lambda: self._conn.execute(sql, (session_id, self._now().timestamp())).fetchone()[0])

    # -- runs -----------------------------------------------------------------------------------------------

    def _run_and_session(
        self, conn: sqlite3.Connection, run_id: str, now: datetime
    ) -> tuple[RunRecord, SessionRecord]:
        """A run and its session, for the writes that change both (`NotFoundError` if either is missing)."""
        run = self._get_run(conn, run_id, now)
        if run is None:
            raise NotFoundError("run", run_id)
        session = self._get_session(conn, run.session_id, now)
        if session is None:
            raise NotFoundError("session", run.session_id)
        return run, session

    def _get_run(self, conn: sqlite3.Connection, run_id: str, now: datetime) -> RunRecord | None:
        doc = self._one(conn, f"SELECT doc FROM runs WHERE run_id = ? AND {LIVE}", run_id, now.timestamp())
        return None if doc is None else RunRecord.model_validate_json(doc)

    def _put_run(self, conn: sqlite3.Connection, run: RunRecord, now: datetime) -> RunRecord:
        run = run.model_copy(update={"etag": _etag()})
        conn.execute(
            "INSERT OR REPLACE INTO runs (run_id, session_id, ordinal, etag, expires_at, doc)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (run.run_id, run.session_id, run.ordinal, run.etag,
             self._expiry(now, rules.retention_seconds(run, self._ttl)), run.model_dump_json()),
        )
        return run

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

        def op() -> RunRecord:
            now = self._now()
            with self._tx() as conn:
                existing = self._get_run(conn, record.run_id, now)
                if existing is not None:
                    return existing
                session = self._get_session(conn, record.session_id, now)
                if new_session is not None:
                    if session is not None and session.active_run_id != record.run_id:
                        raise ConflictError(f"session {record.session_id!r} exists already")
                    if session is None:
                        session = self._put_session(conn, rules.new_session(new_session, now), now)
                if session is None:
                    raise NotFoundError("session", record.session_id)
                claim = rules.claim_session(session, record, now, queue, after_run_count)
                if claim.session is not None:
                    self._put_session(conn, claim.session, now)
                return self._put_run(conn, claim.run, now)

        return await self._point(op)

    async def close_unwritten_start(self, planned: RunRecord) -> tuple[RunRecord, bool]:
        # `begin_run` is one transaction: no claim lands without its run, so only the record is written. A
        # transaction of the start that commits later finds it and claims nothing.
        def op() -> tuple[RunRecord, bool]:
            now = self._now()
            with self._tx() as conn:
                existing = self._get_run(conn, planned.run_id, now)
                if existing is not None:
                    return existing, False
                return self._put_run(conn, rules.closed_start(planned, now), now), True

        return await self._point(op)

    async def take_turn(self, run_id: str) -> RunRecord | None:
        def op() -> RunRecord | None:
            now = self._now()
            with self._tx() as conn:
                run, session = self._run_and_session(conn, run_id, now)
                turn = rules.take_turn(session, run, now)
                if turn.session is not None:
                    self._put_session(conn, turn.session, now)
                if turn.run is not None:
                    run = self._put_run(conn, turn.run, now)
                return run if turn.granted else None

        return await self._point(op)

    async def get_run(self, run_id: str, *, session_id: str | None = None) -> RunRecord | None:
        run = await self._point(lambda: self._get_run(self._conn, run_id, self._now()))
        return None if run is None or (session_id is not None and run.session_id != session_id) else run

    async def update_run(
        self, run_id: str, *, if_match: str | None = None, current: RunRecord | None = None, **changes: Any
    ) -> RunRecord:
        # `current` saves Cosmos a read; here the read is part of the transaction anyway.
        def op() -> RunRecord:
            now = self._now()
            with self._tx() as conn:
                run = self._get_run(conn, run_id, now)
                if run is None:
                    raise NotFoundError("run", run_id)
                if if_match is not None and run.etag != if_match:
                    raise ConflictError(f"run {run_id!r} changed since it was read (etag mismatch)")
                updated = rules.apply_run_changes(run, changes, now)
                ensure_fits("run", run_id, updated)
                return self._put_run(conn, updated, now)

        return await self._point(op)

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
        def op() -> RunRecord:
            now = self._now()
            with self._tx() as conn:
                run = self._get_run(conn, run_id, now)
                if run is None:
                    raise NotFoundError("run", run_id)
                finished = rules.finish(run, status, output, error, usage, now)
                if finished is not None:
                    ensure_fits("run", run_id, finished)
                    run = self._put_run(conn, finished, now)
                session = self._get_session(conn, run.session_id, now)
                released = None if session is None else rules.release_session(session, run_id, now)
                if released is not None:
                    self._put_session(conn, released, now)
                return run

        return await self._point(op)

    async def record_run_tools(
        self,
        run_id: str,
        tools: Sequence[JsonObject],
        skipped: Sequence[JsonObject] = (),
        skipped_servers: Sequence[JsonObject] = (),
    ) -> RunRecord:
        def op() -> RunRecord:
            now = self._now()
            with self._tx() as conn:
                run = self._get_run(conn, run_id, now)
                if run is None:
                    raise NotFoundError("run", run_id)
                updated = rules.record_tools(run, list(tools), now, list(skipped), list(skipped_servers))
                if updated is None:
                    return run
                ensure_fits("run", run_id, updated)
                return self._put_run(conn, updated, now)

        return await self._point(op)

    async def reopen_run(self, run_id: str, rewind: JsonObject, *, after_rewinds: int | None = None) -> RunRecord:
        def op() -> RunRecord | StoreError:
            now = self._now()
            with self._tx() as conn:
                run, session = self._run_and_session(conn, run_id, now)
                reopened = rules.reopen(session, run, rewind, now, after_rewinds)
                if reopened.session is not None:
                    self._put_session(conn, reopened.session, now)
                if reopened.run is not None:
                    ensure_fits("run", run_id, reopened.run)
                    run = self._put_run(conn, reopened.run, now)
                return reopened.refused or run  # the run failed again is committed before the refusal is raised

        reopened = await self._point(op)
        if isinstance(reopened, StoreError):
            raise reopened
        return reopened

    async def list_runs(self, session_id: str) -> list[RunRecord]:
        sql = f"SELECT doc FROM runs WHERE session_id = ? AND {LIVE} ORDER BY ordinal"
        rows = await self._run(lambda: self._conn.execute(sql, (session_id, self._now().timestamp())).fetchall())
        return [RunRecord.model_validate_json(r[0]) for r in rows]

    async def list_owner_runs(
        self,
        owner_id: str,
        *,
        status: str | None = None,
        agent: str | None = None,
        limit: int = 50,
        continuation: str | None = None,
    ) -> Page[RunRecord]:
        scope = f"owner-runs:{owner_id}:{status}:{agent}"
        position = cursor.decode(scope, continuation) if continuation else None

        def op() -> Page[RunRecord]:
            sql = f"SELECT doc, {CREATED_OF_DOC}, run_id FROM runs WHERE {LIVE} AND {OWNER_OF_DOC} = ?"
            params: list[Any] = [self._now().timestamp(), owner_id]
            for field, value in (("status", status), ("agent", agent)):
                if value is not None:
                    sql, params = sql + f" AND json_extract(doc, '$.{field}') = ?", [*params, value]
            if position is not None:
                sql += f" AND ({CREATED_OF_DOC} < ? OR ({CREATED_OF_DOC} = ? AND run_id > ?))"
                params += [position["c"], position["c"], position["i"]]
            rows = self._conn.execute(sql + f" ORDER BY {CREATED_OF_DOC} DESC, run_id LIMIT ?", [*params, limit + 1])
            return _page(rows.fetchall(), limit, scope, RunRecord)

        return await self._run(op)

    async def list_branch_runs(self, branched_from: str, *, owner_id: str, limit: int = 10) -> list[RunRecord]:
        sql = (f"SELECT doc FROM runs WHERE {BRANCHED_FROM_OF_DOC} = ? AND {LIVE} AND {OWNER_OF_DOC} = ? "
               f"ORDER BY {CREATED_OF_DOC} DESC, run_id LIMIT ?")
        params = (branched_from, self._now().timestamp(), owner_id, limit)
        rows = await self._run(lambda: self._conn.execute(sql, params).fetchall())
        return [RunRecord.model_validate_json(r[0]) for r in rows]

    # -- approvals ------------------------------------------------------------------------------------------

    async def list_decidable_approvals(
        self,
        keys: Sequence[str],
        *,
        status: ApprovalStatus | None = "pending",
        limit: int = 50,
        continuation: str | None = None,
    ) -> Page[ApprovalRecord]:
        wanted = sorted(set(keys))
        scope = f"decidable:{status}:{','.join(wanted)}"
        position = cursor.decode(scope, continuation) if continuation else None
        if not wanted:
            return Page(items=[])

        def op() -> Page[ApprovalRecord]:
            marks = ", ".join("?" for _ in wanted)
            sql = (
                f"SELECT doc, created_at, approval_id FROM approvals a WHERE {LIVE} AND EXISTS "
                f"(SELECT 1 FROM json_each(a.doc, '$.decider_keys') k WHERE k.value IN ({marks}))"
            )
            params: list[Any] = [self._now().timestamp(), *wanted]
            if status is not None:
                sql, params = sql + " AND status = ?", [*params, status]
            if position is not None:
                sql += " AND (created_at < ? OR (created_at = ? AND approval_id > ?))"
                params += [position["c"], position["c"], position["i"]]
            rows = self._conn.execute(sql + " ORDER BY created_at DESC, approval_id LIMIT ?", [*params, limit + 1])
            return _page(rows.fetchall(), limit, scope, ApprovalRecord)

        return await self._run(op)

    def _get_approval(self, conn: sqlite3.Connection, approval_id: str, now: datetime) -> ApprovalRecord | None:
        doc = self._one(
            conn, f"SELECT doc FROM approvals WHERE approval_id = ? AND {LIVE}", approval_id, now.timestamp()
        )
        return None if doc is None else ApprovalRecord.model_validate_json(doc)

    def _put_approval(self, conn: sqlite3.Connection, approval: ApprovalRecord, now: datetime) -> ApprovalRecord:
        approval = approval.model_copy(update={"etag": _etag()})
        conn.execute(
            "INSERT OR REPLACE INTO approvals (approval_id, run_id, session_id, status, created_at, etag, expires_at,"
            " doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (approval.approval_id, approval.run_id, approval.session_id, approval.status,
             approval.created_at.timestamp(), approval.etag, self._expiry(now), approval.model_dump_json()),
        )
        return approval

    async def put_approvals(self, records: Sequence[ApprovalRecord]) -> list[ApprovalRecord]:
        batch = list(records)
        size = sum(ensure_fits("approval", record.approval_id, record) for record in batch)

        def op() -> list[ApprovalRecord]:
            now = self._now()
            stored: list[ApprovalRecord] = []
            with self._tx() as conn:
                for record in batch:
                    existing = self._get_approval(conn, record.approval_id, now)
                    if existing is None:
                        fresh = record.model_copy(update={"created_at": stamp(record.created_at, now)})
                        existing = self._put_approval(conn, fresh, now)
                    stored.append(existing)
            return stored

        return await self._batch(op, size)

    async def get_approval(self, approval_id: str, *, session_id: str | None = None) -> ApprovalRecord | None:
        record = await self._point(lambda: self._get_approval(self._conn, approval_id, self._now()))
        return None if record is None or (session_id is not None and record.session_id != session_id) else record

    async def list_approvals(
        self,
        *,
        run_id: str | None = None,
        session_id: str | None = None,
        status: ApprovalStatus | None = None,
    ) -> list[ApprovalRecord]:
        if run_id is None and session_id is None:
            raise ValueError("list_approvals needs a run_id or a session_id")

        def op() -> list[ApprovalRecord]:
            sql, params = f"SELECT doc FROM approvals WHERE {LIVE}", [self._now().timestamp()]
            for column, value in (("run_id", run_id), ("session_id", session_id), ("status", status)):
                if value is not None:
                    sql, params = sql + f" AND {column} = ?", [*params, value]
            rows = self._conn.execute(sql + " ORDER BY created_at, approval_id", params).fetchall()
            return [ApprovalRecord.model_validate_json(r[0]) for r in rows]

        return await self._run(op)

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
        def op() -> ApprovalRecord:
            now = self._now()
            with self._tx() as conn:
                approval = self._get_approval(conn, approval_id, now)
                if approval is None:
                    raise NotFoundError("approval", approval_id)
                decided = rules.decide(
                    approval, status, decided_by, reason, edited_arguments, decided_at or now, decided_by_name
                )
                ensure_fits("approval", approval_id, decided)
                return self._put_approval(conn, decided, now)

        return await self._point(op)

    async def escalate_approval(
        self,
        approval_id: str,
        to: str,
        *,
        expires_at: datetime,
        escalated_at: datetime | None = None,
        to_keys: Sequence[str] = (),
    ) -> ApprovalRecord:
        def op() -> ApprovalRecord:
            now = self._now()
            with self._tx() as conn:
                approval = self._get_approval(conn, approval_id, now)
                if approval is None:
                    raise NotFoundError("approval", approval_id)
                escalated = rules.escalate(approval, to, expires_at, escalated_at or now, to_keys)
                return self._put_approval(conn, escalated, now) if escalated is not approval else approval

        return await self._point(op)

    # -- effects --------------------------------------------------------------------------------------------

    async def record_effect(
        self, session_id: str, key: str, kind: str, payload: JsonObject
    ) -> tuple[EffectRecord, bool]:
        record = EffectRecord(session_id=session_id, key=key, kind=kind, payload=payload)
        ensure_fits("effect", key, record)

        def op() -> tuple[EffectRecord, bool]:
            now = self._now()
            with self._tx() as conn:
                existing = self._get_effect(conn, session_id, key, now)
                if existing is not None:
                    return existing, False
                fresh = record.model_copy(update={"created_at": now})
                conn.execute(
                    "INSERT OR REPLACE INTO effects (session_id, key, kind, created_at, expires_at, doc)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (session_id, key, kind, now.timestamp(), self._expiry(now), fresh.model_dump_json()),
                )
                return fresh, True

        return await self._point(op)

    async def list_effects(self, session_id: str, *, kind: str | None = None) -> list[EffectRecord]:
        def op() -> list[EffectRecord]:
            sql = f"SELECT doc FROM effects WHERE session_id = ? AND {LIVE}"
            params: list[Any] = [session_id, self._now().timestamp()]
            if kind is not None:
                sql, params = sql + " AND kind = ?", [*params, kind]
            rows = self._conn.execute(sql + " ORDER BY created_at, key", params).fetchall()
            return [EffectRecord.model_validate_json(r[0]) for r in rows]

        return await self._run(op)

    async def get_effect(self, session_id: str, key: str) -> EffectRecord | None:
        return await self._point(lambda: self._get_effect(self._conn, session_id, key, self._now()))

    def _get_effect(self, conn: sqlite3.Connection, session_id: str, key: str, now: datetime) -> EffectRecord | None:
        doc = self._one(
            conn, f"SELECT doc FROM effects WHERE session_id = ? AND key = ? AND {LIVE}", session_id, key,
            now.timestamp(),
        )
        return None if doc is None else EffectRecord.model_validate_json(doc)

    # -- signals ------------------------------------------------------------------------------------------

    async def append_signal(self, session_id: str, name: str, signal_id: str, payload: Any) -> SignalRecord:
        record = SignalRecord(session_id=session_id, name=name, index=1, signal_id=signal_id, payload=payload)
        ensure_fits("signal", signal_id, record)

        def op() -> SignalRecord:
            now = self._now()
            with self._tx() as conn:  # BEGIN IMMEDIATE: the reads and the insert are one step
                appended = conn.execute(  # once per signal id: a repeated append returns the signal as stored
                    f"SELECT doc FROM signals WHERE session_id = ? AND name = ? AND {SIGNAL_ID_OF_DOC} = ? AND {LIVE}",
                    (session_id, name, signal_id, now.timestamp()),
                ).fetchone()
                if appended is not None:
                    return SignalRecord.model_validate_json(appended[0])
                # Expired rows count too: an index is never handed out twice.
                last = conn.execute(
                    "SELECT MAX(idx) FROM signals WHERE session_id = ? AND name = ?", (session_id, name)
                ).fetchone()[0]
                fresh = record.model_copy(update={"index": (last or 0) + 1, "created_at": now})
                conn.execute(
                    "INSERT INTO signals (session_id, name, idx, created_at, expires_at, doc)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (session_id, name, fresh.index, now.timestamp(), self._expiry(now), fresh.model_dump_json()),
                )
                return fresh

        return await self._point(op)

    async def list_signals(
        self, session_id: str, name: str, *, from_index: int = 1, limit: int = 100
    ) -> list[SignalRecord]:
        def op() -> list[SignalRecord]:
            rows = self._conn.execute(
                f"SELECT doc FROM signals WHERE session_id = ? AND name = ? AND idx >= ? AND {LIVE}"
                " ORDER BY idx LIMIT ?",
                (session_id, name, from_index, self._now().timestamp(), limit),
            ).fetchall()
            return [SignalRecord.model_validate_json(r[0]) for r in rows]

        return await self._run(op)

    # -- lifecycle ------------------------------------------------------------------------------------------

    async def sweep_expired(self) -> None:
        """Delete every expired row now (reads never return them either way)."""

        def op() -> None:
            self._last_sweep = float("-inf")
            with self._tx() as conn:
                self._maybe_sweep(conn, self._now())

        await self._run(op)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._runner.close()


def _checked_batch(session_id: str, records: Sequence[MessageRecord]) -> tuple[list[MessageRecord], int]:
    """The messages to write, checked (one session, each within the item limit), and their size in JSON bytes."""
    batch = list(records)
    rules.check_batch(session_id, batch)
    return batch, sum(ensure_fits("message", record.message_id, record) for record in batch)
