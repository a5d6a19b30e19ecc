"""Concurrency: 10, 100 and 500 runs started at once over HTTP, each polled to the end with continuation tokens.

The app runs in its own devhost process (`SubprocessHost`, SQLite store and engine state in files), with every
function in that process (`--workers 0`) or with activity and HTTP functions in worker processes (`--workers 2`, the
`FUNCTIONS_WORKER_PROCESS_COUNT` analogue); the scripted model server runs in another process, the clients in this
one. Each run is `blobs 2 size 200` (3 model calls, 2 tool calls). Latency = start request to the poll that sees the
run finished (what a client experiences, including the long-poll granularity); throughput = runs / wall time.

What limited a batch: `devhost CPU` is the CPU of the devhost process and its workers over the wall time (cores),
`busiest process` the most loaded one of them, `machine busy` the share of all cores busy (everything on the machine,
clients and model server included). A busiest process near 1.00 core while the machine has idle cores means the
runtime is the bottleneck; a machine near 100% busy with no process at a full core means the machine is.

    python -m bench.concurrency_bench [--runs 10,100,500] [--workers 0,2] [--model-latency-ms 0] [--no-record]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.checks import BenchmarkFailedError
from bench.cpu import CpuWindow, process_tree
from bench.report import command_line, median, percentile, publish, section, table
from bench.workload.brain import blobs_prompt
from bench.workload.client import FINAL
from bench.workload.host import REPO_ROOT, START_PATH, app_env
from bench.workload.model_process import model_server_process
from devhost.testing import SubprocessHost

PROMPT = blobs_prompt(2, 200)


class RunClient:
    """The benchmark's clients: start a run, then long-poll it with its continuation tokens until it is finished.

    On aiohttp rather than the test helpers' httpx: at hundreds of concurrent runs httpx's own CPU cost (~30 ms per
    run) rivals the runtime's, and the clients share the machine with the host they measure.
    """

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session

    async def run(self, prompt: str) -> dict[str, Any]:
        view = await self._json("POST", START_PATH, json={"input": prompt})
        while view["status"] not in FINAL:
            params = {"wait_seconds": "10"}
            if view.get("continuation_token"):
                params["continuation_token"] = view["continuation_token"]
            view = await self._json("GET", f"/api/runs/{view['run_id']}", params=params)
        return view

    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        async with self.session.request(method, path, **kwargs) as response:
            if response.status not in (200, 202):
                raise RuntimeError(f"{method} {path}: HTTP {response.status}")
            return await response.json()


async def one_run(client: RunClient, results: list[float], failures: list[str]) -> None:
    started = time.perf_counter()
    try:
        final = await client.run(PROMPT)
        if final["status"] != "completed":
            failures.append(final["status"])
            return
        results.append(time.perf_counter() - started)
    except Exception as error:  # a benchmark reports failures instead of stopping at the first
        failures.append(type(error).__name__)


async def batch(base_url: str, runs: int) -> tuple[list[float], list[str], float]:
    latencies: list[float] = []
    failures: list[str] = []
    connector = aiohttp.TCPConnector(limit=min(runs, 500))
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(base_url, connector=connector, timeout=timeout) as session:
        client = RunClient(session)
        started = time.perf_counter()
        await asyncio.gather(*(one_run(client, latencies, failures) for _ in range(runs)))
        return latencies, failures, time.perf_counter() - started


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def limit(busiest_cores: float, machine_busy: float) -> str:
    if busiest_cores >= 0.9:
        return "one devhost process (a full core)"
    if machine_busy >= 0.85:
        return "the machine (its cores busy)"
    return "neither (cores left idle)"


def measure(workers: int, latency_ms: float, batches: list[int]) -> list[list[object]]:
    rows: list[list[object]] = []
    with model_server_process(latency_ms) as model_url, tempfile.TemporaryDirectory() as tmp:
        env = app_env(model_url, str(Path(tmp) / "sessions.sqlite3"))
        host = SubprocessHost(REPO_ROOT, state_path=Path(tmp) / "engine.sqlite3", env=env, workers=workers).start()
        try:
            asyncio.run(batch(host.base_url, 4))  # warm-up: imports, store, model clients in every worker
            pid = host.pid
            if pid is None:
                raise BenchmarkFailedError("the app host did not start")
            for runs in batches:
                cpu = CpuWindow(process_tree(pid)).start()
                clients = own_cpu_seconds()
                latencies, failures, wall = asyncio.run(batch(host.base_url, runs))
                clients = own_cpu_seconds() - clients
                cpu.stop()
                ms = [x * 1000 for x in latencies] or [float("nan")]
                rows.append([workers, f"{latency_ms:g}", runs, len(latencies), len(failures), wall,
                             len(latencies) / wall, median(ms), percentile(ms, 95), percentile(ms, 99),
                             cpu.total / wall, cpu.busiest / wall, clients / wall, f"{cpu.machine_busy:.0%}",
                             cpu.total * 1000 / runs,
                             limit(cpu.busiest / wall, cpu.machine_busy)])
        finally:
            host.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default="10,100,500")
    parser.add_argument("--workers", default="0,2", help="worker process counts to compare (0 = in the host)")
    parser.add_argument("--model-latency-ms", default="0", help="scripted model latencies to run (comma-separated)")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    batches = [int(r) for r in args.runs.split(",")]
    rows = [
        row
        for latency in (float(x) for x in args.model_latency_ms.split(","))
        for workers in (int(w) for w in args.workers.split(","))
        for row in measure(workers, latency, batches)
    ]
    body = table(["workers", "model ms", "concurrent runs", "completed", "failed", "wall s", "runs/s", "p50 ms",
                  "p95 ms", "p99 ms", "devhost CPU (cores)", "busiest process (cores)", "clients CPU (cores)",
                  "machine busy", "devhost CPU ms / run", "limited by"], rows)
    notes = (
        f"Each run = `{PROMPT}` (3 model calls, 2 tool calls, plus the run's record/finish activities). "
        "Clients poll with `wait_seconds=10`; a poll answers as soon as there is something new. `workers` 0: HTTP, "
        "orchestrator episodes and activities share one event loop in one process; 2: activity and HTTP functions "
        "run in two worker processes, the host process keeps the HTTP server, the engine and orchestrator episodes. "
        "The machine's cores are shared with the benchmark's own clients and the model server."
    )
    publish(section("Concurrent runs over HTTP", command_line("bench.concurrency_bench"), body, notes),
            record=not args.no_record)


if __name__ == "__main__":
    main()
