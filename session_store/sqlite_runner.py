"""Where the SQLite store's operations run: on the store's own thread, or inline on the caller's thread.

Every operation can run on the store's one worker thread (`run`), which owns a connection that waits for SQLite's
write lock (`busy_timeout`): counts, deletes and sweeps always go there, since their work grows with the data, and so
does a list of messages that reads more than a batch (`INLINE_BATCH_BYTES`; a shorter one is a point operation).

A point operation (read or write a few records, each at most 2 MB: `point`) runs inline instead, on a second
connection of the calling thread, when that is certain to be quick: the connection never waits for a lock
(`busy_timeout = 0`), so when another writer (the worker thread, another process) holds the write lock, or the
operation would sweep expired rows, it gives up at once (`RunOnThread`) and runs on the worker thread, which waits.
An inline operation is one synchronous call: its transaction never spans an `await`, so it cannot interleave with
another operation of the same process. Handing an operation to a thread and back costs 0.1-0.5 ms of wall time on a
2-core VM, which was most of a point read's cost (`bench/RESULTS.md`, "Cost and speed pass 4").

The inline connection never checkpoints the WAL itself (a checkpoint copies pages and syncs the file); every
`CHECKPOINT_EVERY_COMMITS` inline commits the worker thread runs one, and until it is done every operation queues
behind it on that thread: the WAL is only reused from its start when a checkpoint copied all of it, which inline
writes going on meanwhile would never let happen. A `:memory:` database is private to its one connection, so it runs
everything on the worker thread, as does a store opened with `inline=False` (`SESSION_STORE_INLINE=false`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .errors import StoreUnavailableError

T = TypeVar("T")
CHECKPOINT_EVERY_COMMITS = 100
_BUSY_CODES = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}


class RunOnThread(Exception):
    """Raised by an operation running inline when it would wait for a lock or do unbounded work."""


def is_busy(exc: sqlite3.Error) -> bool:
    """SQLite refused because another connection holds a lock (SQLITE_BUSY/LOCKED and their extended codes)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _BUSY_CODES


def connect_inline(path: str) -> sqlite3.Connection:
    """The inline connection: never waits for a lock, never checkpoints; the schema and WAL mode exist already."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 0")
    conn.execute("PRAGMA synchronous = NORMAL")  # per connection, as the worker's: a commit never syncs the file
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    return conn


class SqliteRunner:
    """The worker thread with its connection, and the inline connection (None for `:memory:` or `inline=False`)."""

    def __init__(self, path: str, connect: Callable[[str], sqlite3.Connection], *, inline: bool = True) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="session-store-sqlite")
        try:
            self._worker_conn = self._executor.submit(connect, path).result()
            self._inline_conn = connect_inline(path) if inline and path != ":memory:" else None
        except sqlite3.Error as exc:
            self._executor.shutdown(wait=False)
            raise StoreUnavailableError(f"cannot open the SQLite session store at {path!r}: {exc}") from exc
        self._inline_lock = threading.Lock()
        self._local = threading.local()
        self._inline_commits = 0
        self._checkpointing = False  # a checkpoint is queued or running: everything goes to the worker thread

    @property
    def conn(self) -> sqlite3.Connection:
        """The connection of the operation running on this thread."""
        inline: sqlite3.Connection | None = getattr(self._local, "conn", None)
        return inline if inline is not None else self._worker_conn

    @property
    def inline(self) -> bool:
        """Whether the operation running on this thread runs inline (and must not wait or sweep)."""
        return getattr(self._local, "conn", None) is not None

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """On the worker thread."""
        return await asyncio.wrap_future(self._executor.submit(fn, *args))

    async def point(self, fn: Callable[[], T]) -> T:
        """Inline when that is quick (see the module doc), else on the worker thread. `fn` must be safe to run again
        from the start after `RunOnThread` or a busy error (its transaction was rolled back)."""
        done, result = self._try_inline(fn)
        if not done:
            return await self.run(fn)
        # Yield once, as an operation on the worker thread does: a chain of store calls never holds the loop, whose
        # connections' I/O (a peer's close among it) is handled in between as before.
        await asyncio.sleep(0)
        return result  # type: ignore[return-value]

    def _try_inline(self, fn: Callable[[], T]) -> tuple[bool, T | None]:
        """(True, result) when `fn` ran inline; (False, None) when it must run on the worker thread."""
        if self._inline_conn is None or self._checkpointing or not self._inline_lock.acquire(blocking=False):
            return False, None
        try:
            if self._inline_conn is None:  # closed meanwhile
                return False, None
            self._local.conn = self._inline_conn
            try:
                return True, fn()
            except RunOnThread:
                return False, None
            except sqlite3.OperationalError as exc:
                if is_busy(exc):
                    return False, None
                raise
        finally:
            self._local.conn = None
            self._inline_lock.release()

    def begin_failed(self, exc: sqlite3.OperationalError) -> Exception:
        """What a failed `BEGIN IMMEDIATE` raises: inline and busy, go to the worker thread; else the store is
        unusable."""
        if self.inline and is_busy(exc):
            return RunOnThread()
        return StoreUnavailableError(f"SQLite session store is locked or unusable: {exc}")

    def committed(self) -> None:
        """After each COMMIT: every `CHECKPOINT_EVERY_COMMITS` inline commits, a passive checkpoint on the worker."""
        if not self.inline:
            return
        self._inline_commits += 1
        if self._inline_commits % CHECKPOINT_EVERY_COMMITS == 0:
            self._checkpointing = True
            self._executor.submit(self._checkpoint)

    def _checkpoint(self) -> None:
        try:
            with contextlib.suppress(sqlite3.Error):  # PASSIVE never waits; what it cannot copy now, the next one does
                self._worker_conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            self._checkpointing = False

    async def close(self) -> None:
        with self._inline_lock:
            inline, self._inline_conn = self._inline_conn, None
        if inline is not None:
            inline.close()
        await self.run(self._worker_conn.close)  # the last connection to close checkpoints the rest of the WAL
        self._executor.shutdown(wait=True)
