"""Concurrency: 10, 100 and 500 runs started at once over HTTP, each polled to the end with continuation tokens.

The app runs in its own devhost process (`SubprocessHost`, SQLite store and engine state in files), the scripted
model server (0 ms latency) in another, the clients in this one. Each run is `blobs 2 size 200` (3 model calls,
2 tool calls). Latency = start request to the poll that sees the run finished (what a client experiences, including
the long-poll granularity); throughput = runs / wall time of the batch. `host CPU` is the devhost process's CPU time
over the batch wall time (cores busy): near the core count means the machine, not the runtime, is the limit;
`host CPU ms / run` is the runtime's own cost, which does not depend on what else the machine is doing.

    python -m bench.concurrency_bench [--runs 10,100,500] [--no-record]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from bench.report import command_line, median, percentile, publish, section, table
from bench.workload.brain import blobs_prompt
from bench.workload.client import async_client, poll, start_run
from bench.workload.host import REPO_ROOT, app_env
from bench.workload.model_process import model_server_process
from devhost.testing import SubprocessHost

PROMPT = blobs_prompt(2, 200)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one_run(base_url_client, results: list[float], failures: list[str]) -> None:
    started = time.perf_counter()
    try:
        view = await start_run(base_url_client, PROMPT)
        final, _ = await poll(base_url_client, view, deadline_s=300, wait_seconds=10)
        if final["status"] != "completed":
            failures.append(final["status"])
            return
        results.append(time.perf_counter() - started)
    except Exception as error:  # a benchmark reports failures instead of stopping at the first
        failures.append(type(error).__name__)


async def batch(base_url: str, runs: int) -> tuple[list[float], list[str], float]:
    latencies: list[float] = []
    failures: list[str] = []
    async with async_client(base_url, connections=min(runs, 500), timeout=300) as client:
        started = time.perf_counter()
        await asyncio.gather(*(one_run(client, latencies, failures) for _ in range(runs)))
        return latencies, failures, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default="10,100,500")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    rows = []
    with model_server_process() as model_url, tempfile.TemporaryDirectory() as tmp:
        env = app_env(model_url, str(Path(tmp) / "sessions.sqlite3"))
        host = SubprocessHost(REPO_ROOT, state_path=Path(tmp) / "engine.sqlite3", env=env).start()
        try:
            asyncio.run(batch(host.base_url, 2))  # warm-up: imports, store, model clients
            for runs in (int(r) for r in args.runs.split(",")):
                assert host.pid is not None
                cpu_before = cpu_seconds(host.pid)
                latencies, failures, wall = asyncio.run(batch(host.base_url, runs))
                cpu = cpu_seconds(host.pid) - cpu_before
                ms = [x * 1000 for x in latencies] or [float("nan")]
                rows.append([runs, len(latencies), len(failures), wall, len(latencies) / wall, median(ms),
                             percentile(ms, 95), percentile(ms, 99), cpu / wall, cpu * 1000 / runs])
        finally:
            host.stop()
    body = table(["concurrent runs", "completed", "failed", "wall s", "runs/s", "p50 ms", "p95 ms", "p99 ms",
                  "host CPU (cores)", "host CPU ms / run"], rows)
    notes = (
        f"Each run = `{PROMPT}` (3 model calls, 2 tool calls, plus the run's record/finish activities). "
        "Clients poll with `wait_seconds=10`; a poll answers as soon as there is something new; while nothing "
        "changes the server checks the orchestration every 0.1 s, backing off to 1 s. Reading: devhost runs HTTP "
        "handlers, orchestrator episodes and async activities on one event loop in one process, so a batch is "
        "CPU-bound in that process once its loop is busy, and the scheduler is fair: every run of a batch advances "
        "step by step together, so p50 is close to the batch's wall time. `host CPU ms / run` is what one run "
        "costs the runtime; `host CPU` below one core with a machine load average above the core count means the "
        "process was sharing the CPU with other work."
    )
    publish(section("Concurrent runs over HTTP", command_line("bench.concurrency_bench"), body, notes),
            record=not args.no_record)


if __name__ == "__main__":
    main()
