"""The SQLite session store's point operations inline on the caller's loop vs on its worker thread (`sqlite_runner`).

Two figures, each side by side in the same run: (1) one point operation through the store's API (read a message,
read a run, append one message) with the operation inline and with every operation sent to the worker thread; (2)
durable turns of the `bench overhead` workload (`blobs 2 size 200`: 5 steps, 0 ms model) on devhost, each side in a
fresh process, the sides taking turns round after round: a shared VM's speed drifts by tens of percent within
minutes, and alternating keeps that drift out of the comparison.

    python -m bench.store_threading_bench [--rounds 3] [--turns 60] [--no-record]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.checks import expect
from bench.report import command_line, median, publish, section, table
from session_store import MessageRecord, RunRecord, SqliteSessionStore

SIDES = ("inline", "worker thread")


def _message(session_id: str, seq: int) -> MessageRecord:
    return MessageRecord(session_id=session_id, message_id=f"m{seq}", seq=seq, run_id="r1", role="assistant",
                         payload={"role": "assistant", "contents": [{"type": "text", "text": "x" * 300}]})


async def _time_us(call: Callable[[int], Awaitable[object]], count: int) -> float:
    started = time.perf_counter()
    for i in range(count):
        await call(i)
    return (time.perf_counter() - started) / count * 1e6


async def point_operations(side: str, count: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        # The worker-thread side: every operation on the store's thread (what the store did before inline operations).
        store = SqliteSessionStore(str(Path(tmp) / "sessions.sqlite3"), inline=side == "inline")
        try:
            session = await store.create_session("s1", "agent")
            await store.begin_run(RunRecord(run_id="r1", session_id=session.session_id, agent="agent", ordinal=1))
            figures = {"append one message": await _time_us(
                lambda i: store.append_messages("s1", [_message("s1", i)]), count)}
            figures["read a message"] = await _time_us(lambda i: store.get_message("s1", f"m{i}"), count)
            figures["read a run"] = await _time_us(lambda i: store.get_run("r1"), count)
            return figures
        finally:
            await store.close()


def durable_turns(side: str, turns: int) -> float:
    """Median turn ms of one side, in a fresh process (devhost, the workload app, the scripted model)."""
    code = f"from bench.store_threading_bench import _turns_main; _turns_main({side!r}, {turns})"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False)
    expect(result.returncode == 0, result.stderr[-2000:])
    return float(result.stdout.strip().splitlines()[-1])


def _turns_main(side: str, turns: int) -> None:
    from bench.overhead_bench import _durable_turn
    from bench.workload.host import workload_host
    from bench.workload.model_process import model_server_process

    with (
        model_server_process(0.0) as url,
        tempfile.TemporaryDirectory() as tmp,
        workload_host(url, store_path=f"{tmp}/sessions.sqlite3", state_path=f"{tmp}/engine.sqlite3",
                      env={"SESSION_STORE_INLINE": "true" if side == "inline" else "false"}) as host,
    ):
        for _ in range(5):
            _durable_turn(host, None)
        times = []
        for _ in range(turns):
            started = time.perf_counter()
            _durable_turn(host, None)
            times.append(time.perf_counter() - started)
    print(median(times) * 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--operations", type=int, default=500)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    ops = {side: asyncio.run(point_operations(side, args.operations)) for side in SIDES}
    rounds = [{side: durable_turns(side, args.turns) for side in SIDES} for _ in range(args.rounds)]
    body = table(["point operation", "inline µs", "worker thread µs"],
                 [[name, ops["inline"][name], ops["worker thread"][name]] for name in ops["inline"]])
    body += "\n\nDurable turn ms (p50 of each round, 5 steps at 0 ms model; the sides alternate):\n\n"
    body += table(["round", "inline", "worker thread", "inline / worker thread"],
                  [[i + 1, r["inline"], r["worker thread"], r["inline"] / r["worker thread"]]
                   for i, r in enumerate(rounds)])
    saved = median([r["worker thread"] - r["inline"] for r in rounds])
    body += f"\n\nInline point operations save {saved:.2f} ms per turn ({saved / 5:.2f} ms per step), median of rounds."
    notes = ("The worker-thread side is the store as it was before (every operation handed to its one thread and "
             "back); everything else is the same code. Lists, counts and sweeps run on the worker thread on both "
             "sides.")
    publish(section("SQLite store: inline point operations vs the worker thread",
                    command_line("bench.store_threading_bench"), body, notes), record=not args.no_record)


if __name__ == "__main__":
    main()
