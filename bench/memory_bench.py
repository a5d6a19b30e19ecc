"""Memory: what a host keeps of runs that completed, and of runs waiting on a person.

Runs that wait hours for an approval must not hold a worker's memory, and a worker serving runs for days must not
grow with them. The benchmark runs the app on devhost in this process (SQLite store and state files, real clock, the
scripted model server in a process of its own) in four phases:

1. warm-up: `--warmup` completed runs (`blobs 2 size 200`: 3 model calls, 2 tool calls) - imports, connection pools;
2. completed: `--completed` more, the Python heap (`tracemalloc`, started after the warm-up) read before and after;
3. waiting: `--waiting` runs started together, each stopped at an approval (`email ...`), read once all wait;
4. decided: every one of them approved and completed, read again: what is left of them.

Each reading splits the heap by who allocated what is still alive: the app, devhost (which on Azure is the
Functions host and the Durable extension, in another process), the Durable SDK, other. The bounded caches fill over
hundreds or thousands of runs to their bounds, which a run of this length would take for growth: each reading empties
them first and gives what they held on its own - the app's payloads built again on replays (`agent_runs.wire`) and
devhost's timestamp memos. What is kept of runs in flight by design is counted: the app's carried episodes
(`orchestrators/loop_replay.py`) and conversation cache entries (`agent_runs/conversation_cache.py`), which go when a
run ends, and devhost's index of instances and the histories of those running.

    python -m bench.memory_bench [--warmup 300] [--completed 300] [--waiting 300] [--no-record]
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.checks import expect
from bench.cpu_breakdown import SHARED
from bench.report import command_line, publish, section, table
from bench.workload.brain import blobs_prompt, email_prompt
from bench.workload.host import START_PATH, workload_host
from bench.workload.model_process import model_server_process
from devhost.testing import InProcessHost

TRACEBACK_FRAMES = 12  # deep enough to reach the app's or devhost's frame under the libraries they call
# Who allocated what stays alive: the innermost frame of an allocation's stack under one of these. Libraries are
# charged to their caller, as in `cpu_breakdown` (pydantic parsing a record for the store: the app).
MEMORY_OWNERS = (
    ("/devhost/", "devhost"),
    ("/azure/durable_functions/", "Durable SDK"),
    *((marker, "app") for marker in ("/orchestrators/", "/activities/", "/http_api/", *SHARED)),
)
OWNER_NAMES = ("app", "devhost", "Durable SDK", "other")
RUN_TIMEOUT_SECONDS = 120.0
PHASES = ("warm", "completed", "waiting", "decided")  # a reading after each (see the module's docstring)


@dataclass(frozen=True)
class BoundedCache:
    """A cache kept on purpose, bounded in entries (and size): how many it holds, and how to empty it."""

    name: str
    entries: Callable[[], int]
    empty: Callable[[], None]


@dataclass(frozen=True)
class Reading:
    """The process's memory at one point, after a full garbage collection, with every bounded cache emptied first:
    each fills over hundreds or thousands of runs to its bound, which a run of this benchmark would take for growth.
    What each held (entries, and the heap that emptying it freed) is given on its own."""

    heap: dict[str, int]  # bytes of Python objects allocated since tracemalloc started and alive, by owner
    caches: dict[str, tuple[int, int]]  # by cache: (entries, bytes freed by emptying it)
    running: dict[str, int]  # what the host keeps of runs in flight, by design: count of each

    @classmethod
    def take(cls, host: InProcessHost) -> Reading:
        running = _running(host)
        caches = {}
        for cache in _bounded_caches():
            gc.collect()
            before, entries = tracemalloc.get_traced_memory()[0], cache.entries()
            cache.empty()
            gc.collect()
            caches[cache.name] = (entries, before - tracemalloc.get_traced_memory()[0])
        heap = {owner: 0 for owner in OWNER_NAMES}
        for stat in tracemalloc.take_snapshot().statistics("traceback"):
            heap[_owner(stat.traceback)] += stat.size
        return cls(heap, caches, running)

    @property
    def heap_bytes(self) -> int:
        return sum(self.heap.values())


def _owner(traceback: tracemalloc.Traceback) -> str:
    for frame in reversed(traceback):  # (innermost first)
        for marker, owner in MEMORY_OWNERS:
            if marker in frame.filename:
                return owner
    return "other"


def _bounded_caches() -> list[BoundedCache]:
    """The app's and devhost's bounded caches, as the host imported them: the app's payloads built again on replays
    (`agent_runs.wire.ReplayedPayloads`, one per compact activity and one for the custom status) and devhost's memos
    of parsed history timestamps (its own `timefmt.parse_iso`, and the one it puts on the SDK's `dt_parse`:
    `devhost.invoke.install_sdk_timestamp_cache`)."""
    replayed_type = sys.modules["agent_runs.wire"].ReplayedPayloads
    replayed = [o for o in gc.get_objects() if type(o) is replayed_type]  # (not isinstance: lazy proxies import)
    memos = [sys.modules["devhost.protocol.timefmt"].parse_iso]
    sdk_parse = getattr(sys.modules.get("azure.durable_functions.models.history.HistoryEvent"), "dt_parse", None)
    if hasattr(sdk_parse, "cache_clear"):
        memos.append(sdk_parse)

    def empty_replayed() -> None:
        for cache in replayed:
            cache.clear()

    def empty_memos() -> None:
        for memo in memos:
            memo.cache_clear()

    return [
        BoundedCache("app: payloads built again on replays", lambda: sum(r.held()[0] for r in replayed),
                     empty_replayed),
        BoundedCache("devhost: timestamp memos", lambda: sum(m.cache_info().currsize for m in memos), empty_memos),
    ]


def _running(host: InProcessHost) -> dict[str, int]:
    """What the host keeps of the runs in flight by design, read from the modules it imported (bounded too: see
    their modules): the app's carried episodes and conversation cache entries (a run's go when it ends), devhost's
    index of instances and the histories of those running."""
    carried = sys.modules["orchestrators.loop_replay"].CARRIED.held()
    conversations = sys.modules["agent_runs.services"].RunServices.current().conversations
    conversation_runs, conversation_messages = conversations.held()
    instances = host.engine._rt.instances  # (devhost's engine state: white-box, as its own tests read it)
    return {
        "app: carried episodes": carried,
        "app: conversation cache, runs": conversation_runs,
        "app: conversation cache, messages": conversation_messages,
        "devhost: instances indexed": len(instances),
        "devhost: histories held (running instances)": sum(1 for i in instances.values() if i.history is not None),
    }


def _start(host: InProcessHost, prompt: str) -> str:
    response = host.client.post(START_PATH, json={"input": prompt})
    expect(response.status_code in (200, 202), response.text)
    return str(response.json()["run_id"])


def _complete(host: InProcessHost, count: int) -> None:
    for _ in range(count):
        status = host.wait_for_status(_start(host, blobs_prompt(2, 200)), timeout=RUN_TIMEOUT_SECONDS)
        expect(status["runtimeStatus"] == "Completed", status)


def _wait_on_approvals(host: InProcessHost, count: int) -> list[str]:
    run_ids = [_start(host, email_prompt(f"person{i}@example.com")) for i in range(count)]
    host.wait_until_idle(RUN_TIMEOUT_SECONDS)
    for run_id in run_ids:
        expect(host.client.get(f"/api/runs/{run_id}").json()["status"] == "requires_action", run_id)
    return run_ids


def _approve(host: InProcessHost, run_ids: list[str]) -> None:
    for run_id in run_ids:
        for approval in host.client.get(f"/api/runs/{run_id}/approvals").json()["approvals"]:
            decided = host.client.post(f"/api/runs/{run_id}/approvals/{approval['approval_id']}",
                                       json={"decision": "approve"})
            expect(decided.status_code == 202, decided.text)
    host.wait_until_idle(RUN_TIMEOUT_SECONDS)
    for run_id in run_ids:
        status = host.get_status(run_id)
        expect(status is not None and status["runtimeStatus"] == "Completed", status)


def measure(warmup: int, completed: int, waiting: int, workdir: Path) -> dict[str, Reading]:
    """The readings after each phase (see the module's docstring)."""
    with model_server_process(0.0) as url, workload_host(
        url, store_path=str(workdir / "sessions.sqlite3"), state_path=str(workdir / "engine.sqlite3")
    ) as host:
        _complete(host, warmup)
        tracemalloc.start(TRACEBACK_FRAMES)
        try:
            readings = {"warm": Reading.take(host)}
            _complete(host, completed)
            readings["completed"] = Reading.take(host)
            run_ids = _wait_on_approvals(host, waiting)
            readings["waiting"] = Reading.take(host)
            _approve(host, run_ids)
            readings["decided"] = Reading.take(host)
        finally:
            tracemalloc.stop()
    return readings


def _kb(value: float) -> float:
    return value / 1024


def report(readings: dict[str, Reading], completed: int, waiting: int) -> tuple[str, dict[str, float]]:
    in_order = [readings[phase] for phase in PHASES]
    warm, done, held, decided = in_order
    phases = (
        (f"{completed} more completed runs", warm, done, completed),
        (f"{waiting} runs waiting for an approval", done, held, waiting),
        (f"the same {waiting}, approved and completed (what is left)", done, decided, waiting),
    )
    rows = [[label, *(_kb(after.heap[o] - before.heap[o]) / runs for o in OWNER_NAMES),
             _kb(after.heap_bytes - before.heap_bytes) / runs]
            for label, before, after, runs in phases]
    figures = {
        "app_completed": _kb(done.heap["app"] - warm.heap["app"]) / completed,
        "app_waiting": _kb(held.heap["app"] - done.heap["app"]) / waiting,
        "app_decided": _kb(decided.heap["app"] - done.heap["app"]) / waiting,
    }
    running = [[name, *(r.running[name] for r in in_order)] for name in warm.running]
    caches = [[name, *(f"{r.caches[name][0]} ({_kb(r.caches[name][1]) / 1024:.1f} MB)" for r in in_order)]
              for name in warm.caches]
    body = "\n\n".join([
        table(["phase: Python heap KB per run", *OWNER_NAMES, "all"], rows),
        table(["kept of runs in flight (count)", *PHASES], running),
        table(["bounded caches, emptied before each reading: entries (heap)", *PHASES], caches),
        "Python heap counted from the end of the warm-up, without the bounded caches, by who allocated what is "
        "still alive (the innermost frame of the app's, devhost's or the Durable SDK's; libraries are charged to "
        "their caller: pydantic's bounded cache of short strings it validated, for one, to the app). A cache's heap "
        "counts what it took since the warm-up. The process's RSS is not given: tracemalloc's own bookkeeping is "
        "most of it.",
    ])
    return body, figures


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--completed", type=int, default=300)
    parser.add_argument("--waiting", type=int, default=300)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    expect(args.completed > 0 and args.waiting > 0, "--completed and --waiting must be positive")
    with tempfile.TemporaryDirectory() as workdir:
        readings = measure(args.warmup, args.completed, args.waiting, Path(workdir))
    body, figures = report(readings, args.completed, args.waiting)
    publish(section("Memory: completed and waiting runs", command_line("bench.memory_bench"), body),
            record=not args.no_record)
    return figures


if __name__ == "__main__":
    main()
