"""Store benchmark: append and read costs as one session grows to 10,000 messages, on SQLite and local Cosmos.

    python -m bench.store_bench [--messages 10000] [--stores sqlite,cosmos] [--no-record]

Appends one message per call (what an activity does after a model turn or a tool result) and, at checkpoints,
times the reads the run layer makes: the tail after a cursor (20 messages), the first page (100), count, last seq,
and, for SQLite, the whole history page by page. Prints a table and appends it to bench/RESULTS.md with the machine,
date and command. The local Cosmos server is an in-memory behaviour fake that scans whole containers on every query:
its read figures say nothing about a real account (where these are indexed single-partition queries).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from bench.checks import expect
from session_store import MessageRecord, SessionStore, SqliteSessionStore, StoreSettings

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
TOOL_CALL = {"id": "call-1", "name": "get_weather", "arguments": {"city": "Paris"}}
PAYLOAD = {"content": "x" * 400, "tool_calls": [TOOL_CALL]}  # a typical ~0.5 KB assistant message


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


async def _timed(fn: Callable[[], Awaitable[object]], repeat: int) -> float:
    """Median wall time of ``repeat`` calls."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


async def _read_all(store: SessionStore, session_id: str) -> int:
    total, token = 0, None
    while True:
        page = await store.list_messages(session_id, limit=100, continuation=token)
        total += len(page.items)
        token = page.continuation
        if token is None:
            return total


async def bench_store(name: str, store: SessionStore, messages: int, full_reads: bool) -> list[list[str]]:
    session_id = f"bench-{uuid.uuid4().hex[:8]}"
    await store.create_session(session_id, "bench")
    checkpoints = sorted({c for c in (100, 1000, 2500, 5000, 7500, 10_000) if c <= messages} | {messages})
    rows, appended, window = [], 0, []
    for checkpoint in checkpoints:
        while appended < checkpoint:
            record = MessageRecord(session_id=session_id, message_id=f"{session_id}:{appended}", seq=appended,
                                   role="assistant", payload=PAYLOAD)
            start = time.perf_counter()
            await store.append_messages(session_id, [record])
            window.append(time.perf_counter() - start)
            appended += 1
        repeat, cursor = 5, appended - 21
        tail = await _timed(lambda: store.list_messages(session_id, after_seq=cursor, limit=20), repeat)  # noqa: B023
        first = await _timed(lambda: store.list_messages(session_id, limit=100), repeat)
        count = await _timed(lambda: store.count_messages(session_id), repeat)
        last = await _timed(lambda: store.last_seq(session_id), repeat)
        full = "-"
        if full_reads:
            start = time.perf_counter()
            read = await _read_all(store, session_id)
            expect(read == appended, f"read {read} of the {appended} messages appended")
            full = _ms(time.perf_counter() - start)
        window.sort()
        rows.append([name, str(appended), _ms(statistics.mean(window)), _ms(window[len(window) // 2]),
                     _ms(window[int(len(window) * 0.95)]), _ms(tail), _ms(first), _ms(count), _ms(last), full])
        print(" | ".join(rows[-1]), flush=True)
        window = []
    return rows


def _machine() -> str:
    node = shutil.which("node")
    node_version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip() if node else "-"
    return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"Node {node_version}")


HEADER = ["store", "messages", "append mean ms", "append p50 ms", "append p95 ms", "tail 20 ms", "first 100 ms",
          "count ms", "last seq ms", "read all ms"]


def _record(rows: list[list[str]], command: str) -> None:
    lines = [
        f"\n## Session store: append/read as a session grows ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)\n",
        f"Machine: {_machine()}. Command: `{command}`.",
        "Append columns: one message per call, over the appends since the previous row. Read columns: median of 5.",
        "cosmos-local is the in-memory fake (every query scans the container): its reads do not predict a real "
        "account, where they are indexed single-partition queries.\n",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]
    with RESULTS.open("a", encoding="utf-8") as results:
        results.write("\n".join(lines) + "\n")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--stores", default="sqlite,cosmos")
    parser.add_argument("--no-record", action="store_true", help="print only; do not append to bench/RESULTS.md")
    args = parser.parse_args()
    print(" | ".join(HEADER))
    rows: list[list[str]] = []
    if "sqlite" in args.stores:
        with tempfile.TemporaryDirectory() as tmp:
            store = SqliteSessionStore(str(Path(tmp) / "bench.sqlite3"))
            try:
                rows += await bench_store("sqlite", store, args.messages, full_reads=True)
            finally:
                await store.close()
    if "cosmos" in args.stores:
        from cosmos_local import start_local_cosmos
        from session_store.cosmos_store import CosmosSessionStore

        with start_local_cosmos() as server:
            settings = StoreSettings(COSMOS_ENDPOINT=server.endpoint, COSMOS_KEY=server.key, COSMOS_DATABASE="bench")
            store = CosmosSessionStore.open(settings)
            try:
                rows += await bench_store("cosmos-local", store, args.messages, full_reads=False)
            finally:
                await store.close()
    if not args.no_record:
        _record(rows, " ".join(["python -m bench.store_bench", *sys.argv[1:]]))


if __name__ == "__main__":
    asyncio.run(main())
