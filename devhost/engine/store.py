"""SQLite persistence (WAL): instances, per-execution history, inbox messages (incl. timers), in-flight activity work
items and entity states. One transaction per commit; all access from the engine's loop thread.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS instances (
    instance_id TEXT PRIMARY KEY, name TEXT NOT NULL, version TEXT, execution_id TEXT NOT NULL,
    status TEXT NOT NULL, input TEXT, output TEXT, custom_status TEXT,
    created REAL NOT NULL, updated REAL NOT NULL, parent TEXT
);
CREATE TABLE IF NOT EXISTS history (
    instance_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL, PRIMARY KEY (instance_id, seq)
);
CREATE TABLE IF NOT EXISTS inbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT, instance_id TEXT NOT NULL, execution_id TEXT,
    event TEXT NOT NULL, visible_at REAL
);
CREATE INDEX IF NOT EXISTS inbox_instance ON inbox (instance_id);
CREATE TABLE IF NOT EXISTS work (
    id INTEGER PRIMARY KEY AUTOINCREMENT, instance_id TEXT NOT NULL, execution_id TEXT NOT NULL,
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


class Store:
    def __init__(self, path: str) -> None:
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        if path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self.tx: Transaction | None = None

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One atomic commit; an exception (incl. a simulated crash) rolls everything back."""
        self._db.execute("BEGIN IMMEDIATE")
        tx = Transaction(self._db)
        try:
            yield tx
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def load(self) -> Loaded:
        db = self._db
        loaded = Loaded()
        for (instance_id,) in db.execute("SELECT instance_id FROM instances"):
            row = self.load_instance(instance_id)
            if row is not None:
                loaded.instances.append(row)
        for row in db.execute("SELECT id, instance_id, execution_id, event, visible_at FROM inbox ORDER BY id"):
            loaded.inbox.append(InboxMessage(row[0], row[1], row[2], json.loads(row[3]), row[4]))
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

    def add_message(self, instance_id: str, execution_id: str | None, event: dict[str, Any],
                    visible_at: float | None = None) -> int:
        cursor = self._db.execute(
            "INSERT INTO inbox (instance_id, execution_id, event, visible_at) VALUES (?,?,?,?)",
            (instance_id, execution_id, json.dumps(event, ensure_ascii=False), visible_at),
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

    def delete_work(self, work_id: int) -> None:
        self._db.execute("DELETE FROM work WHERE id=?", (work_id,))

    def put_entity(self, row: EntityRow) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO entities VALUES (?,?,?,?,?,?)",
            (row.entity_id, row.name, row.key, int(row.exists), row.state, row.last_op),
        )
