"""The SQLite store's point operations run inline on the caller's loop, and give way to the worker thread whenever
they would wait (another writer holds the lock) or do work that grows with the data (a sweep): the loop never waits
for SQLite's lock, concurrent writers (here and in another process) stay atomic, and the WAL stays bounded although
the inline connection never checkpoints it itself. `sqlite_runner.py` says why."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from store_helpers import new_id

from session_store import ManualClock, MessageRecord, SqliteSessionStore, sqlite_runner
from session_store.factory import open_store
from session_store.settings import StoreSettings
from session_store.sqlite_store import INLINE_BATCH_BYTES

REPO_ROOT = Path(__file__).resolve().parents[2]


def _message(session_id: str, seq: int) -> MessageRecord:
    return MessageRecord(
        session_id=session_id, message_id=f"m{seq}", seq=seq, run_id="r", role="user",
        payload={"role": "user", "contents": [{"type": "text", "text": f"message {seq}"}]},
    )


def _raw_count(path: Path, table: str) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


async def test_a_write_behind_another_writers_lock_waits_off_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    store = SqliteSessionStore(str(path))
    try:
        session = await store.create_session("s1", "agent")
        blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        blocker.execute("BEGIN IMMEDIATE")  # another process's write transaction holds the lock
        started = time.monotonic()
        write = asyncio.create_task(store.append_messages(session.session_id, [_message(session.session_id, 0)]))
        await asyncio.sleep(0)  # the write tried inline, found the lock taken and went to the worker thread
        # The loop goes on meanwhile: a read is answered (WAL readers never wait for the writer) ...
        assert (await store.get_session("s1")) == session
        assert not write.done()
        # ... and the write lands once the lock is released.
        threading.Thread(target=blocker.execute, args=("COMMIT",)).start()
        (stored,) = await write
        assert await store.get_message("s1", "m0") == stored
        # An inline attempt that waited for the lock would have held the loop for the worker's 10 s busy timeout.
        assert time.monotonic() - started < 5
        blocker.close()
    finally:
        await store.close()


async def test_writers_in_two_processes_allocate_distinct_gapless_indexes(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    store = SqliteSessionStore(str(path))
    try:
        await store.create_session("shared", "agent")
        other = textwrap.dedent(f"""
            import asyncio, sys
            sys.path.insert(0, {str(REPO_ROOT)!r})
            from session_store import SqliteSessionStore

            async def main():
                store = SqliteSessionStore({str(path)!r})
                print("ready", flush=True)
                sys.stdin.readline()
                await asyncio.gather(*(store.append_signal("shared", "go", f"other-{{i}}", i) for i in range(40)))
                await store.close()

            asyncio.run(main())
        """)
        child = subprocess.Popen([sys.executable, "-c", other], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)
        try:
            assert child.stdout is not None and child.stdin is not None
            assert child.stdout.readline().strip() == "ready"
            child.stdin.write("go\n")
            child.stdin.flush()
            ours = await asyncio.gather(*(store.append_signal("shared", "go", f"ours-{i}", i) for i in range(40)))
            assert child.wait(timeout=60) == 0
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            for pipe in (child.stdin, child.stdout):
                if pipe is not None:
                    pipe.close()
        listed = await store.list_signals("shared", "go")
        assert [s.index for s in listed] == list(range(1, 81))
        assert {s.signal_id for s in listed} == {f"ours-{i}" for i in range(40)} | {f"other-{i}" for i in range(40)}
        assert {s.index: s.signal_id for s in ours}.items() <= {s.index: s.signal_id for s in listed}.items()
    finally:
        await store.close()


async def test_inline_writes_keep_the_wal_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_runner, "CHECKPOINT_EVERY_COMMITS", 10)
    path = tmp_path / "sessions.sqlite3"
    wal = Path(f"{path}-wal")
    store = SqliteSessionStore(str(path))
    try:
        await store.create_session("s1", "agent")
        for seq in range(5):
            await store.append_messages("s1", [_message("s1", seq)])
        per_commit = wal.stat().st_size / 6
        for seq in range(5, 300):
            await store.append_messages("s1", [_message("s1", seq)])
        assert await store.count_messages("s1") == 300  # (on the worker thread, after the checkpoints it was given)
        # Without checkpoints the WAL would hold all 301 commits; with one every 10, the file is reused from its start.
        assert wal.stat().st_size < 40 * per_commit
    finally:
        await store.close()
    assert _raw_count(path, "messages") == 300


async def test_a_due_sweep_runs_with_the_next_write_and_reclaims_expired_rows(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    clock = ManualClock()
    store = SqliteSessionStore(str(path), ttl_seconds=100, clock=clock)
    try:
        await store.create_session("old", "agent")
        await store.append_messages("old", [_message("old", seq) for seq in range(3)])
        clock.advance(150)  # expired: invisible at once, still on disk until a sweep
        assert await store.get_session("old") is None
        assert _raw_count(path, "messages") == 3
        fresh = await store.create_session(new_id("s"), "agent")  # the first write after the sweep interval
        assert _raw_count(path, "messages") == 0
        assert _raw_count(path, "sessions") == 1
        assert await store.get_session(fresh.session_id) == fresh
        await store.append_messages(fresh.session_id, [_message(fresh.session_id, 0)])
        clock.advance(150)
        await store.sweep_expired()
        assert (_raw_count(path, "sessions"), _raw_count(path, "messages")) == (0, 0)
    finally:
        await store.close()


async def test_a_memory_store_runs_everything_on_its_worker_thread() -> None:
    store = SqliteSessionStore(":memory:")
    try:
        session = await store.create_session("s1", "agent")
        await store.append_messages("s1", [_message("s1", 0)])
        assert await store.get_session("s1") == session
        assert [m.message_id for m in (await store.list_messages("s1")).items] == ["m0"]
    finally:
        await store.close()


def _spy_on_the_worker_thread(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the operations handed to a store's worker thread from now on (the real hand-over still runs)."""
    handed: list[str] = []
    real_run = sqlite_runner.SqliteRunner.run

    async def run(self: sqlite_runner.SqliteRunner, fn: Any, *args: Any) -> Any:
        handed.append(getattr(fn, "__qualname__", repr(fn)))
        return await real_run(self, fn, *args)

    monkeypatch.setattr(sqlite_runner.SqliteRunner, "run", run)
    return handed


async def test_a_batch_over_the_inline_limit_is_written_on_the_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writing a batch costs time in proportion to its size: past `INLINE_BATCH_BYTES` it leaves the loop."""
    store = SqliteSessionStore(str(tmp_path / "sessions.sqlite3"))
    try:
        await store.create_session("s1", "agent")
        handed = _spy_on_the_worker_thread(monkeypatch)
        small = [_message("s1", seq) for seq in range(3)]
        await store.append_messages("s1", small)
        assert handed == []  # a few records: inline
        text = "x" * 100_000  # 3 messages of ~100 KB: over the 256 KB limit together, each within a record's 2 MB
        large = [
            MessageRecord(session_id="s1", message_id=f"big{seq}", seq=seq, run_id="r", role="user",
                          payload={"role": "user", "contents": [{"type": "text", "text": text}]})
            for seq in range(10, 13)
        ]
        assert sum(len(m.model_dump_json()) for m in large) > INLINE_BATCH_BYTES
        stored = await store.append_messages("s1", large)
        assert len(handed) == 1 and "append_messages" in handed[0]
        assert [m.message_id for m in (await store.list_messages("s1")).items] == ["m0", "m1", "m2", *(
            m.message_id for m in stored)]
        assert (await store.get_message("s1", "big11")) == stored[1]
    finally:
        await store.close()


async def test_a_list_that_reads_past_the_inline_limit_is_read_on_the_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page of messages is read inline while it stays within `INLINE_BATCH_BYTES` (a run's first model call reads
    its session so; a hop to the thread cost ~2 ms of it); a page that reads more goes to the worker thread and
    answers the same, so the loop never parses a whole long session."""
    store = SqliteSessionStore(str(tmp_path / "sessions.sqlite3"))
    try:
        await store.create_session("s1", "agent")
        text = "x" * 100_000
        large = [
            MessageRecord(session_id="s1", message_id=f"big{seq}", seq=seq, run_id="r", role="user",
                          payload={"role": "user", "contents": [{"type": "text", "text": text}]})
            for seq in range(3)
        ]
        await store.append_messages("s1", large[:2])
        handed = _spy_on_the_worker_thread(monkeypatch)
        two = await store.list_messages("s1")
        assert [m.message_id for m in two.items] == ["big0", "big1"]
        assert handed == []  # ~200 KB: inline
        await store.append_messages("s1", large[2:])
        handed.clear()
        three = await store.list_messages("s1")
        assert three.items == [*two.items, (await store.get_message("s1", "big2"))]
        assert len(handed) == 1 and "list_messages" in handed[0]  # ~300 KB: read again on the thread
        # A page within the limit of a long session stays inline, and its continuation reads on from there.
        handed.clear()
        first = await store.list_messages("s1", limit=1)
        rest = await store.list_messages("s1", limit=2, continuation=first.continuation)
        assert [m.message_id for m in first.items + rest.items] == ["big0", "big1", "big2"]
        assert handed == []
    finally:
        await store.close()


@pytest.mark.parametrize("configured", ["argument", "setting"])
async def test_inline_operations_can_be_turned_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, configured: str
) -> None:
    """`inline=False` (`SESSION_STORE_INLINE=false`): every operation goes to the store's thread, and the store
    keeps its contract."""
    path = tmp_path / "sessions.sqlite3"
    if configured == "argument":
        store = SqliteSessionStore(str(path), inline=False)
    else:
        monkeypatch.setenv("SESSION_STORE_PATH", str(path))
        monkeypatch.setenv("SESSION_STORE_INLINE", "false")
        opened = open_store(StoreSettings())
        assert isinstance(opened, SqliteSessionStore)
        store = opened
    handed = _spy_on_the_worker_thread(monkeypatch)
    try:
        session = await store.create_session("s1", "agent")
        await store.append_messages("s1", [_message("s1", 0)])
        assert await store.get_session("s1") == session
        assert (await store.get_message("s1", "m0")) is not None
        assert len(handed) == 4
    finally:
        await store.close()


async def test_a_chain_of_inline_operations_lets_the_loop_run_in_between(tmp_path: Path) -> None:
    """Each call yields to the loop once, as a call on the worker thread did: other tasks (the connections' I/O
    among them) run between a request's store calls instead of waiting for the whole chain."""
    store = SqliteSessionStore(str(tmp_path / "sessions.sqlite3"))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    try:
        await store.create_session("s1", "agent")
        running = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        ticks = 0
        for seq in range(100):
            await store.append_messages("s1", [_message("s1", seq)])
            assert await store.get_message("s1", f"m{seq}") is not None
        assert ticks >= 150  # one per call (200 calls), give or take the first and last
        running.cancel()
    finally:
        await store.close()


async def test_inline_writes_survive_the_process_being_killed(tmp_path: Path) -> None:
    """The inline connection never checkpoints: what it committed lives in the WAL until the worker (or the next
    opener) copies it. A host killed (SIGKILL, nothing closed) loses none of it, and the next opener writes on."""
    path = tmp_path / "sessions.sqlite3"
    writer = textwrap.dedent(f"""
        import asyncio, os, signal, sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from session_store import MessageRecord, SqliteSessionStore

        async def main():
            store = SqliteSessionStore({str(path)!r})
            await store.create_session("s1", "agent")
            for seq in range(150):  # past a checkpoint request, with more commits after it
                await store.append_messages("s1", [MessageRecord(
                    session_id="s1", message_id=f"m{{seq}}", seq=seq, run_id="r", role="user",
                    payload={{"role": "user", "contents": [{{"type": "text", "text": "x"}}]}})])
            await store.append_signal("s1", "go", "last", None)
            print("written", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

        asyncio.run(main())
    """)
    child = subprocess.run([sys.executable, "-c", writer], capture_output=True, text=True, timeout=60, check=False)
    assert child.stdout.strip() == "written" and child.returncode == -9, child.stderr
    store = SqliteSessionStore(str(path))
    try:
        assert await store.count_messages("s1") == 150
        assert [m.message_id for m in (await store.list_messages("s1", limit=500)).items] == [
            f"m{seq}" for seq in range(150)
        ]
        assert [s.signal_id for s in await store.list_signals("s1", "go")] == ["last"]
        appended = await store.append_signal("s1", "go", "after", None)  # the reopened store writes on
        assert appended.index == 2
    finally:
        await store.close()
