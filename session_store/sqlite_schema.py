"""SQLite connection set-up and schema for the embedded store.

Each table keeps the record as JSON (``doc``) plus the columns its queries filter and sort on. ``expires_at`` (epoch
seconds, NULL = never) implements retention: reads ignore expired rows and a periodic sweep deletes them.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY, agent TEXT NOT NULL, created_at REAL NOT NULL,
    etag TEXT NOT NULL, expires_at REAL, doc TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS sessions_by_created ON sessions (created_at DESC, session_id);
CREATE INDEX IF NOT EXISTS sessions_by_agent ON sessions (agent, created_at DESC, session_id);
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL, message_id TEXT NOT NULL, seq INTEGER NOT NULL, run_id TEXT,
    expires_at REAL, doc TEXT NOT NULL, PRIMARY KEY (session_id, message_id));
CREATE UNIQUE INDEX IF NOT EXISTS messages_by_seq ON messages (session_id, seq);
CREATE INDEX IF NOT EXISTS messages_by_run ON messages (session_id, run_id, seq);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, ordinal INTEGER NOT NULL,
    etag TEXT NOT NULL, expires_at REAL, doc TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS runs_by_session ON runs (session_id, ordinal);
CREATE TABLE IF NOT EXISTS approvals (
    approval_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, session_id TEXT NOT NULL, status TEXT NOT NULL,
    created_at REAL NOT NULL, etag TEXT NOT NULL, expires_at REAL, doc TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS approvals_by_run ON approvals (run_id, created_at);
CREATE INDEX IF NOT EXISTS approvals_by_session ON approvals (session_id, created_at);
CREATE INDEX IF NOT EXISTS sessions_by_owner ON sessions (json_extract(doc, '$.owner_id'), created_at DESC);
CREATE INDEX IF NOT EXISTS runs_by_owner ON runs (json_extract(doc, '$.owner_id'));
CREATE INDEX IF NOT EXISTS runs_by_branch ON runs (json_extract(doc, '$.branched_from'))
    WHERE json_extract(doc, '$.branched_from') IS NOT NULL;
CREATE INDEX IF NOT EXISTS approvals_by_status ON approvals (status, created_at DESC);
CREATE TABLE IF NOT EXISTS effects (
    session_id TEXT NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL, created_at REAL NOT NULL,
    expires_at REAL, doc TEXT NOT NULL, PRIMARY KEY (session_id, key));
CREATE TABLE IF NOT EXISTS signals (
    session_id TEXT NOT NULL, name TEXT NOT NULL, idx INTEGER NOT NULL, created_at REAL NOT NULL,
    expires_at REAL, doc TEXT NOT NULL, PRIMARY KEY (session_id, name, idx));
"""

TABLES = ("sessions", "messages", "runs", "approvals", "effects", "signals")


def connect(path: str) -> sqlite3.Connection:
    """Open (and create if needed) the database; WAL so a restart or a second process can read while one writes."""
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 10000")
    if path != ":memory:":
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    conn.executescript(SCHEMA)
    for table in TABLES:
        conn.execute(
            f"CREATE INDEX IF NOT EXISTS {table}_expiry ON {table} (expires_at) WHERE expires_at IS NOT NULL"
        )
    conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    return conn
