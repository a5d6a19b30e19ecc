"""devhost engine benchmark: instances/s and per-activity overhead (real clock, SQLite WAL state file).

Scenarios (trivial activities, so the time measured is the engine's own overhead: episodes = real SDK replay,
C# replay, one SQLite transaction per commit, thread hop for sync activities):
  * chain10      - one 10-activity chain at a time, repeated; per-activity overhead = instance time / 10
  * fanout100    - one 100-way fan-out/fan-in at a time, repeated; per-activity overhead = instance time / 100
  * chains100x10 - 100 concurrent 10-step chains started together; wall time and instances/s
  * chain200     - one 200-activity chain: the per-step cost grows with the history (every episode replays it,
                   as in Azure); long agent loops should continue_as_new

Run: python bench/devhost_bench.py [--repeat 20] [--state file|memory] [--no-record]
Appends a section to bench/RESULTS.md unless --no-record.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import azure.durable_functions as df
import azure.functions as func

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.checks import expect
from devhost.app_loader import FunctionIndex
from devhost.engine.api import DurableEngine, RealClock, RuntimeStatus

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def bench_app() -> FunctionIndex:
    app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)

    @app.orchestration_trigger(context_name="context")
    def chain(context: df.DurableOrchestrationContext):
        total = 0
        for i in range(context.get_input()):
            total += yield context.call_activity("inc", i)
        return total

    @app.orchestration_trigger(context_name="context")
    def fanout(context: df.DurableOrchestrationContext):
        results = yield context.task_all([context.call_activity("inc", i) for i in range(context.get_input())])
        return sum(results)

    @app.activity_trigger(input_name="n")
    def inc(n: int) -> int:
        return n + 1

    return FunctionIndex.from_app(app, "bench")


async def _run_one(engine: DurableEngine, name: str, size: int) -> float:
    started = time.perf_counter()
    iid = await engine.start_new(name, None, json.dumps(str(size)))  # the Python client encoding
    status = await engine.wait_for_status(iid, timeout=120)
    expect(status.runtime_status == RuntimeStatus.Completed, status)
    return time.perf_counter() - started


async def _concurrent_chains(engine: DurableEngine, instances: int, steps: int) -> float:
    started = time.perf_counter()
    ids = [await engine.start_new("chain", None, json.dumps(str(steps))) for _ in range(instances)]
    for iid in ids:
        status = await engine.wait_for_status(iid, timeout=300)
        expect(status.runtime_status == RuntimeStatus.Completed, status)
    return time.perf_counter() - started


async def run_benchmarks(repeat: int, state: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        state_path = ":memory:" if state == "memory" else os.path.join(tmp, "bench.sqlite3")
        engine = await DurableEngine.open(bench_app(), state_path=state_path, clock=RealClock())
        try:
            await _run_one(engine, "chain", 10)  # warm-up (imports, thread pool)
            chain = [await _run_one(engine, "chain", 10) for _ in range(repeat)]
            fan = [await _run_one(engine, "fanout", 100) for _ in range(max(repeat // 2, 3))]
            concurrent = await _concurrent_chains(engine, 100, 10)
            long_chain = await _run_one(engine, "chain", 200)
        finally:
            await engine.close()
    return {
        "chain10_instance_ms_median": statistics.median(chain) * 1000,
        "chain10_per_activity_ms_median": statistics.median(chain) * 1000 / 10,
        "chain10_instances_per_s": 1 / statistics.median(chain),
        "fanout100_instance_ms_median": statistics.median(fan) * 1000,
        "fanout100_per_activity_ms_median": statistics.median(fan) * 1000 / 100,
        "chains100x10_wall_s": concurrent,
        "chains100x10_instances_per_s": 100 / concurrent,
        "chains100x10_activities_per_s": 1000 / concurrent,
        "chain200_per_activity_ms": long_chain * 1000 / 200,
    }


def record(results: dict[str, float], command: str, state: str) -> str:
    lines = [
        f"\n## devhost engine ({datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')})\n",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}; state: {state}; real clock.",
        f"Command: `{command}`\n",
        "| metric | value |",
        "|---|---|",
        *[f"| {k} | {v:.2f} |" for k, v in results.items()],
        "",
        f"Targets: per-activity overhead < 5 ms median -> chain {results['chain10_per_activity_ms_median']:.2f} ms, "
        f"fan-out {results['fanout100_per_activity_ms_median']:.2f} ms; 100 concurrent 10-step chains < 10 s -> "
        f"{results['chains100x10_wall_s']:.2f} s.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--state", choices=["file", "memory"], default="file")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(run_benchmarks(args.repeat, args.state))
    section = record(results, "python bench/devhost_bench.py " + " ".join(sys.argv[1:]), args.state)
    print(section)
    if not args.no_record:
        with RESULTS.open("a", encoding="utf-8") as out:
            out.write(section)


if __name__ == "__main__":
    main()
