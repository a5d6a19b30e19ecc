"""devhost's two ways of running the app: in-process (devhost calls the functions) vs the real worker (Azure's
`azure-functions-runtime` in worker processes, driven by the host's messages). What the worker adds per invocation.

`python -m bench.worker_bench [--requests N] [--chains N]` on Python 3.13+ with azure-functions-runtime installed
(`make test-py313`'s venv). HTTP: N sequential GETs of a plain function (tests/devhost/apps/http_basic). Durable:
N sequential function chains (tests/devhost/apps/chaining: 3 activities, 4 orchestrator episodes = 7 invocations).
Prints a Markdown table; the per-invocation line is (real - in-process) / invocations.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import aiohttp

from devhost.engine.api import RuntimeStatus
from devhost.host import DevHost
from devhost.worker.pool import library_version

APPS = Path(__file__).resolve().parents[1] / "tests" / "devhost" / "apps"
CHAIN_INVOCATIONS = 7


MODES = ("inprocess", "runtime")


async def http_ms(requests: int) -> dict[str, list[float]]:
    """Both hosts up at once, requests alternating between them: a loaded machine slows both alike."""
    hosts = {mode: await DevHost.start(APPS / "http_basic", state_path=":memory:", workers=1, worker=mode)
             for mode in MODES}
    timings: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        async with aiohttp.ClientSession() as session:
            for round_ in range(requests + 20):  # the first 20 warm up (imports, connections)
                for mode, host in hosts.items():
                    started = time.perf_counter()
                    async with session.get(f"{host.base_url}/api/hello?name=bench") as response:
                        await response.read()
                        if response.status != 200:
                            raise RuntimeError(f"{mode}: GET hello answered {response.status}")
                    if round_ >= 20:
                        timings[mode].append((time.perf_counter() - started) * 1000)
    finally:
        for host in hosts.values():
            await host.stop()
    return timings


async def chain_ms(chains: int) -> dict[str, list[float]]:
    hosts = {mode: await DevHost.start(APPS / "chaining", state_path=":memory:", workers=1, worker=mode)
             for mode in MODES}
    timings: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        for round_ in range(chains + 3):  # the first three warm up
            for mode, host in hosts.items():
                started = time.perf_counter()
                instance = await host.engine.start_new("chaining")
                done = {RuntimeStatus.Completed, RuntimeStatus.Failed}
                status = await host.engine.wait_for_status(instance, done, 60)
                if status.runtime_status != RuntimeStatus.Completed:
                    raise RuntimeError(f"{mode}: chain {round_} ended {status.runtime_status}")
                if round_ >= 3:
                    timings[mode].append((time.perf_counter() - started) * 1000)
    finally:
        for host in hosts.values():
            await host.stop()
    return timings


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(requests: int, chains: int) -> str:
    if library_version() is None:
        raise SystemExit("the real worker needs Python 3.13+ with azure-functions-runtime (make test-py313's venv)")
    http, chain = await http_ms(requests), await chain_ms(chains)
    rows = []
    for label, timings, invocations in (("HTTP GET (1 invocation)", http, 1),
                                        ("function chain (3 activities + 4 episodes)", chain, CHAIN_INVOCATIONS)):
        inproc, real = timings["inprocess"], timings["runtime"]
        added = (statistics.median(real) - statistics.median(inproc)) / invocations
        rows.append(f"| {label} | {statistics.median(inproc):.2f} | {_p(inproc, 0.95):.2f} | "
                    f"{statistics.median(real):.2f} | {_p(real, 0.95):.2f} | {added:.2f} |")
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    cpus = len(__import__("os").sched_getaffinity(0))
    return "\n".join([
        f"## devhost: in-process vs real worker ({now})",
        "",
        f"Machine: {platform.machine()}, {cpus} cores, {platform.system()} {platform.release()}, Python "
        f"{sys.version.split()[0]}, azure-functions-runtime {library_version()}; state in memory, real clock, "
        "1 function worker process; both hosts run side by side and take turns, so load hits both alike.",
        f"Command: `python -m bench.worker_bench --requests {requests} --chains {chains}`",
        "",
        "| workload | in-process median ms | in-process p95 ms | real worker median ms | real worker p95 ms | "
        "added per invocation ms |",
        "|---|---|---|---|---|---|",
        *rows,
    ])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.worker_bench", description=__doc__)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--chains", type=int, default=40)
    args = parser.parse_args()
    print(asyncio.run(main(args.requests, args.chains)))
