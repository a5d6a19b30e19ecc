"""SQLite persistence (WAL): instances, per-execution history, inbox messages (incl. timers), in-flight activity work
items and entity states. One transaction per commit; all access from the engine's loop thread.

WAL checkpoints (copying the log back into the database file, with its fsyncs) run on a thread of their own, not inside
a commit: SQLite's automatic checkpoint would stall every ~100th commit of the loop thread for tens of milliseconds
on a busy disk. Durability is unchanged: a commit is in the WAL file when COMMIT returns, whoever checkpoints it.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from devhost.protocol.timefmt import parse_iso, to_epoch

log = logging.getLogger("devhost.engine")
CHECKPOINT_EVERY_COMMITS = 100  # ~5 pages per commit: ~500 WAL pages (2 MB) between checkpoints
WAL_SIZE_LIMIT_BYTES = 4 * 1024 * 1024

# Tables written per commit touch as few b-trees (so WAL frames) as they can: instances and history are keyed by their
# primary key itself (WITHOUT ROWID: no separate key index), inbox and work ids are their rowids (unique among the rows
# that exist, increasing with arrival: all the engine needs; AUTOINCREMENT would also write sqlite_sequence). A state
# file created by an earlier devhost keeps its tables (CREATE ... IF NOT EXISTS): the statements are the same for both.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS instances (
    instance_id TEXT PRIMARY KEY, name TEXT NOT NULL, version TEXT, execution_id TEXT NOT NULL,
    status TEXT NOT NULL, input TEXT, output TEXT, custom_status TEXT,
    created REAL NOT NULL, updated REAL NOT NULL, parent TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS history (
    instance_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL, PRIMARY KEY (instance_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS inbox (
    id INTEGER PRIMARY KEY, instance_id TEXT NOT NULL, execution_id TEXT,
    event TEXT NOT NULL, visible_at REAL
);
CREATE TABLE IF NOT EXISTS work (
    id INTEGER PRIMARY KEY, instance_id TEXT NOT NULL, execution_id TEXT NOT NULL,
    task_id INTEGER NOT NULL, name TEXT NOT NULL, input TEXT
);
CREATE TABLE IF NOT EXISTS entities (
    entity_id TEXT PRIMARY KEY, name TEXT NOT NULL, key TEXT NOT NULL, exists_ INTEGER NOT NULL,
    state TEXT, last_op REAL
);
"""


@dataclass
class InstanceRow:
    instance_id: str
    name: str
    version: str | None
    execution_id: str
    status: str
    input: str | None
    output: str | None
    custom_status: str | None
    created: float
    updated: float
    parent: dict[str, Any] | None = None  # {"instance_id","execution_id","task_id","name"}

    def as_params(self) -> tuple[Any, ...]:
        return (
            self.instance_id, self.name, self.version, self.execution_id, self.status, self.input, self.output,
            self.custom_status, self.created, self.updated, json.dumps(self.parent) if self.parent else None,
        )


@dataclass
class InboxMessage:
    id: int
    instance_id: str
    execution_id: str | None  # target execution (None: whichever is current)
    event: dict[str, Any]
    visible_at: float | None = None  # timers: epoch seconds
    text: str | None = None  # the event's JSON text as stored (what the episode sends and appends: encoded once)


@dataclass
class WorkItem:
    id: int
    instance_id: str
    execution_id: str
    task_id: int
    name: str
    input: str | None


@dataclass
class EntityRow:
    entity_id: str
    name: str
    key: str
    exists: bool
    state: str | None
    last_op: float | None


@dataclass
class Loaded:
    instances: list[InstanceRow] = field(default_factory=list)
    inbox: list[InboxMessage] = field(default_factory=list)
    work: list[WorkItem] = field(default_factory=list)
    entities: list[EntityRow] = field(default_factory=list)

    def latest_moment(self) -> float | None:
        """The latest engine time the state recorded (epoch seconds), or None for an empty state: instances' last
        episodes, entities' last operations and the events waiting in the inbox (not timers and retries: those are
        due later, not recorded)."""
        moments = [row.updated for row in self.instances]
        moments += [row.last_op for row in self.entities if row.last_op is not None]
        moments += [to_epoch(parse_iso(m.event["Timestamp"])) for m in self.inbox
                    if m.visible_at is None and isinstance(m.event.get("Timestamp"), str)]
        return max(moments, default=None)


class _Checkpointer:
    """Passive WAL checkpoints on a daemon thread with its own connection, one at a time, when asked."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._wanted = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def request(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="devhost-checkpoint", daemon=True)
            self._thread.start()
        self._wanted.set()

    def close(self) -> None:
        self._stopping = True
        self._wanted.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        db = sqlite3.connect(self._path, isolation_level=None)
        try:
            while True:
                self._wanted.wait()
                self._wanted.clear()
                if self._stopping:
                    return
                try:  # PASSIVE: never blocks the engine's writer; what it cannot copy now, the next one does
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:
                    log.debug("devhost WAL checkpoint skipped: %s", exc)
        finally:
            db.close()


class Store:
    def __init__(self, path: str) -> None:
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._checkpointer: _Checkpointer | None = None
        self._commits = 0
        if path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints run off the commit path (_Checkpointer)
            # Checkpoints run while commits go on, so the WAL is rarely fully copied back when the next commit starts
            # (the moment SQLite can write it from the beginning again): it grew past 50 MB over 200 busy turns and
            # kept that size. When it does start again, the file is cut back to this.
            self._db.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT_BYTES}")
            self._checkpointer = _Checkpointer(path)
        self._db.executescript(_SCHEMA)
        self.tx: Transaction | None = None

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
        self._db.close()  # the last connection to close checkpoints the rest of the WAL itself

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One atomic commit; an exception (incl. a simulated crash) rolls everything back."""
        tx = self.begin()
        try:
            yield tx
        except BaseException:
            self.rollback()
            raise
        self.commit()

    # The same in three calls, for a caller that keeps its own scope (the engine's commit).
    def begin(self) -> Transaction:
        self._db.execute("BEGIN IMMEDIATE")
        return Transaction(self._db)

    def rollback(self) -> None:
        self._db.execute("ROLLBACK")

    def commit(self) -> None:
        self._db.execute("COMMIT")
        self._commits += 1
        if self._checkpointer is not None and self._commits % CHECKPOINT_EVERY_COMMITS == 0:
            self._checkpointer.request()

    def load(self) -> Loaded:
        db = self._db
        loaded = Loaded()
        for (instance_id,) in db.execute("SELECT instance_id FROM instances"):
            row = self.load_instance(instance_id)
            if row is not None:
                loaded.instances.append(row)
        for row in db.execute("SELECT id, instance_id, execution_id, event, visible_at FROM inbox ORDER BY id"):
            loaded.inbox.append(InboxMessage(row[0], row[1], row[2], json.loads(row[3]), row[4], row[3]))
        for row in db.execute("SELECT id, instance_id, execution_id, task_id, name, input FROM work ORDER BY id"):
            loaded.work.append(WorkItem(*row))
        for row in db.execute("SELECT entity_id, name, key, exists_, state, last_op FROM entities"):
            loaded.entities.append(EntityRow(row[0], row[1], row[2], bool(row[3]), row[4], row[5]))
        return loaded

    def load_instance(self, instance_id: str) -> InstanceRow | None:
        row = self._db.execute("SELECT * FROM instances WHERE instance_id=?", (instance_id,)).fetchone()
        if row is None:
            return None
        return InstanceRow(*row[:10], parent=json.loads(row[10]) if row[10] else None)

    def load_history(self, instance_id: str) -> list[str]:
        rows = self._db.execute("SELECT event FROM history WHERE instance_id=? ORDER BY seq", (instance_id,))
        return [r[0] for r in rows]


class Transaction:
    """Write operations of one commit."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def put_instance(self, row: InstanceRow) -> None:
        self._db.execute("INSERT OR REPLACE INTO instances VALUES (?,?,?,?,?,?,?,?,?,?,?)", row.as_params())

    def delete_instance(self, instance_id: str) -> None:
        for table in ("instances", "history", "inbox", "work"):
            self._db.execute(f"DELETE FROM {table} WHERE instance_id=?", (instance_id,))

    def append_history(self, instance_id: str, start_seq: int, texts: list[str]) -> None:
        self._db.executemany(
            "INSERT INTO history VALUES (?,?,?)", [(instance_id, start_seq + i, t) for i, t in enumerate(texts)]
        )

    def reset_history(self, instance_id: str) -> None:
        self._db.execute("DELETE FROM history WHERE instance_id=?", (instance_id,))

    def replace_history(self, instance_id: str, texts: list[str]) -> None:
        self.reset_history(instance_id)
        self.append_history(instance_id, 0, texts)

    def add_message(self, instance_id: str, execution_id: str | None, event_json: str,
                    visible_at: float | None = None) -> int:
        cursor = self._db.execute(
            "INSERT INTO inbox (instance_id, execution_id, event, visible_at) VALUES (?,?,?,?)",
            (instance_id, execution_id, event_json, visible_at),
        )
        return int(cursor.lastrowid or 0)

    def delete_messages(self, ids: list[int]) -> None:
        if ids:
            self._db.executemany("DELETE FROM inbox WHERE id=?", [(i,) for i in ids])

    def add_work(self, instance_id: str, execution_id: str, task_id: int, name: str, input_text: str | None) -> int:
        cursor = self._db.execute(
            "INSERT INTO work (instance_id, execution_id, task_id, name, input) VALUES (?,?,?,?,?)",
            (instance_id, execution_id, task_id, name, input_text),
        )
        return int(cursor.lastrowid or 0)

    def delete_work(self, work: WorkItem) -> None:
        # Not by id alone: ids are rowids, which SQLite hands out again once the highest row is gone (a purge or a
        # new execution of the same instance id deletes the old execution's rows while its activity still runs), so
        # that activity's late result deleted whichever new work item had taken its id, lost at the next restart.
        self._db.execute("DELETE FROM work WHERE id=? AND instance_id=? AND execution_id=? AND task_id=?",
                         (work.id, work.instance_id, work.execution_id, work.task_id))

    def put_entity(self, row: EntityRow) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO entities VALUES (?,?,?,?,?,?)",
            (row.entity_id, row.name, row.key, int(row.exists), row.state, row.last_op),
        )
