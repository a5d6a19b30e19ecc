"""Live streams (SSE): how long a model token takes to reach a stream client, and what 200 open streams cost.

The app runs in its own devhost process (`SubprocessHost`, SQLite files); the scripted model server and the SSE
clients run in this process (aiohttp clients: cheap enough to share the machine with what they measure).

* latency: a run's answer is streamed by the model at a paced rate (`--chunk-ms` per chunk); the model server records
  when each chunk leaves it (`time.monotonic()`, one clock for every process on Linux) and the client when each
  `delta` event arrives; a chunk's latency = arrival of the first delta that contains its last character - its
  departure. With `--workers 0` the model call runs in the process that serves the stream (tokens reach the stream
  in-process, `agent_runs.live_drafts`); with `--workers 1` it runs in a worker process and the stream follows the
  stored draft (`PARTIAL_OUTPUT_INTERVAL_SECONDS`, 0.5 s by default), which is also the cross-instance case on Azure.
* concurrency: `--streams` runs are started with the model holding its answers and one stream is opened on each;
  the devhost process's CPU is measured over an idle window (streams open, nothing happening: watchers backing off,
  pings), then the answers are released and every stream must deliver the whole answer and `done` (none dropped).

    python -m bench.stream_bench [--runs 8] [--chunk-ms 10] [--streams 200] [--idle-s 5] [--no-record]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from bench.checks import BenchmarkFailedError
from bench.cpu import CpuWindow, process_tree
from bench.report import command_line, median, percentile, publish, section, table
from bench.workload.host import REPO_ROOT, START_PATH, app_env
from devhost.testing import SubprocessHost
from scripted_model import Script, ScriptedModelServer

ANSWER_WORDS = 120
ANSWER = " ".join(f"w{i:03d}" for i in range(ANSWER_WORDS))
SHORT_ANSWER = " ".join(f"s{i:02d}" for i in range(24))


async def sse_events(response: aiohttp.ClientResponse) -> AsyncIterator[tuple[str, Any, float]]:
    """(event, data, arrival time) of each event; comments (pings) are skipped."""
    name, data = "", ""
    async for raw in response.content:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif not line and name:
            yield name, json.loads(data), time.monotonic()
            name, data = "", ""


async def stream_run(session: aiohttp.ClientSession, run_id: str,
                     opened: asyncio.Queue[str] | None = None) -> list[tuple[str, Any, float]]:
    async with session.get(f"/api/runs/{run_id}/stream", timeout=aiohttp.ClientTimeout(total=600)) as response:
        if response.status != 200:
            raise RuntimeError(f"stream {run_id}: HTTP {response.status}")
        events = []
        async for event in sse_events(response):
            if not events and opened is not None:
                opened.put_nowait(run_id)
            events.append(event)
            if event[0] == "done":
                return events
    raise RuntimeError(f"stream {run_id} ended before done")


async def start_run(session: aiohttp.ClientSession, prompt: str) -> str:
    async with session.post(START_PATH, json={"input": prompt}) as response:
        if response.status not in (200, 202):
            raise RuntimeError(f"start: HTTP {response.status}")
        return (await response.json())["run_id"]


def text_chunk_ends(sent: list[tuple[float, dict[str, Any]]]) -> list[tuple[int, float]]:
    """(offset of the chunk's last character + 1, departure) of each chunk that carries answer text."""
    ends: list[tuple[int, float]] = []
    offset = 0
    for when, chunk in sent:
        choices = chunk.get("choices") or []
        piece = (choices[0].get("delta") or {}).get("content") if choices else None
        if piece:
            offset += len(piece)
            ends.append((offset, when))
    return ends


def chunk_latencies(sent: list[tuple[float, dict[str, Any]]], events: list[tuple[str, Any, float]]) -> list[float]:
    """Per text chunk: first arrival of a delta covering its last character minus the chunk's departure."""
    ends = text_chunk_ends(sent)
    received, arrivals = 0, []
    for name, data, when in events:
        if name == "delta":
            received = len(data["text"]) if data.get("replace") else received + len(data["text"])
            arrivals.append((received, when))
    latencies = []
    for end, departed in ends:
        arrived = next((when for length, when in arrivals if length >= end), None)
        if arrived is not None:  # chunks after the last delta arrived in the finished answer (an update)
            latencies.append(arrived - departed)
    return latencies


def host_for(tmp: Path, model_url: str, workers: int, name: str) -> SubprocessHost:
    env = app_env(model_url, str(tmp / f"{name}.sessions.sqlite3"))
    return SubprocessHost(REPO_ROOT, state_path=tmp / f"{name}.state.sqlite3", env=env, workers=workers)


async def latency_case(base_url: str, model: ScriptedModelServer, runs: int) -> tuple[list[float], int]:
    latencies: list[float] = []
    covered_by_update = 0
    async with aiohttp.ClientSession(base_url) as session:
        for _ in range(runs):
            model.set_script(Script.of(ANSWER))
            model.hold_answers()  # the stream is open before the first token leaves
            model.chunk_times = []
            run_id = await start_run(session, "stream an answer")
            reader = asyncio.create_task(stream_run(session, run_id))
            while not model.log.requests and not reader.done():
                await asyncio.sleep(0.005)  # waiting for the run to reach its model call (outside the measure)
            await asyncio.sleep(0.05)  # let the stream's first events go out before the answer starts
            model.release_answers()
            events = await reader
            sent, model.chunk_times = model.chunk_times or [], None
            measured = chunk_latencies(sent, events)
            covered_by_update += len(text_chunk_ends(sent)) - len(measured)
            latencies += measured
            model.log.clear()
    return latencies, covered_by_update


async def concurrency_case(base_url: str, model: ScriptedModelServer, pids: list[int], streams: int,
                           idle_s: float) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(base_url, connector=connector) as session:
        model.set_script(Script.of(*([SHORT_ANSWER] * streams)))
        model.hold_answers()
        run_ids = await asyncio.gather(*(start_run(session, f"run {i}") for i in range(streams)))
        opened: asyncio.Queue[str] = asyncio.Queue()
        readers = [asyncio.create_task(stream_run(session, run_id, opened)) for run_id in run_ids]
        for _ in range(streams):  # every stream open and its first events received
            await asyncio.wait_for(opened.get(), 300)
        await asyncio.sleep(1.0)  # let the watchers settle into their idle back-off before measuring
        idle = CpuWindow(pids).start()
        idle_started = time.monotonic()
        await asyncio.sleep(idle_s)  # the measured idle window itself
        idle.stop()
        idle_wall = time.monotonic() - idle_started
        active = CpuWindow(pids).start()
        started = time.monotonic()
        model.release_answers()
        results = await asyncio.gather(*readers, return_exceptions=True)
        wall = time.monotonic() - started
        active.stop()
    complete, failures = 0, []
    for result in results:
        if isinstance(result, BaseException):
            failures.append(f"{type(result).__name__}: {result}")
            continue
        text = "".join(d["text"] for name, d, _ in result if name == "delta")
        done = result[-1][1]
        output = done.get("output") or {}
        if done["status"] == "completed" and output.get("text") == SHORT_ANSWER and SHORT_ANSWER.startswith(text):
            complete += 1
        else:  # said in the notes: a dropped stream is never only a number
            failures.append(f"status {done['status']}, output {output}, deltas {text[:40]!r}")
    return {
        "streams": streams,
        "complete": complete,
        "dropped": streams - complete,
        "failures": sorted(set(failures))[:3],
        "idle_cores": idle.total / idle_wall,
        "idle_ms_per_stream_s": 1000 * idle.total / idle_wall / streams,
        "active_wall_s": wall,
        "active_cpu_ms_per_stream": 1000 * active.total / streams,
    }


async def main_async(args: argparse.Namespace) -> str:
    model = ScriptedModelServer(chunk_delay_ms=args.chunk_ms).start()
    rows, notes = [], []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for workers in (0, 1):
                with host_for(Path(tmp), model.base_url, workers, f"latency{workers}") as host:
                    latencies, by_update = await latency_case(host.base_url, model, args.runs)
                ms = [1000 * v for v in latencies]
                rows.append([workers, "in-process tokens" if workers == 0 else "stored draft (0.5 s interval)",
                             args.runs, len(ms), by_update, median(ms) if ms else "-",
                             percentile(ms, 95) if ms else "-", max(ms) if ms else "-"])
            model.chunk_delay_ms = 0
            with host_for(Path(tmp), model.base_url, 0, "concurrency") as host:
                if host.process is None:
                    raise BenchmarkFailedError("the app host did not start")
                figures = await concurrency_case(host.base_url, model, process_tree(host.process.pid),
                                                 args.streams, args.idle_s)
    finally:
        model.stop()
    body = table(["workers", "deltas from", "runs", "chunks timed", "chunks only in the final update", "p50 ms",
                  "p95 ms", "max ms"], rows)
    body += "\n\n" + table(
        ["concurrent streams", "complete", "dropped", "idle devhost cores", "idle CPU ms per stream per s",
         "release to last done (s)", "active devhost CPU ms per streamed run"],
        [[figures["streams"], figures["complete"], figures["dropped"], figures["idle_cores"],
          figures["idle_ms_per_stream_s"], figures["active_wall_s"], figures["active_cpu_ms_per_stream"]]],
    )
    notes.append(
        f"Latency: answers of {ANSWER_WORDS} words streamed at one chunk per {args.chunk_ms} ms, one stream per run. "
        "Chunk latency = first `delta` event covering the chunk's last character at the client minus the chunk "
        "leaving the scripted model. Concurrency: runs of a 24-word answer, the model holding every answer until "
        "all streams are open (32 runs wait in model calls, the others for an activity slot: devhost's "
        "`max_concurrent_activities`); idle = those streams open with nothing happening; active = from the release "
        "to the last `done`, including the runs' own work (model calls, commits, orchestrator episodes)."
    )
    if figures["failures"]:
        notes.append(f"Failures: {figures['failures']}")
    return section("Live streams (SSE)", command_line("bench.stream_bench"), body, "\n".join(notes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--chunk-ms", type=float, default=10.0)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--idle-s", type=float, default=5.0)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    publish(asyncio.run(main_async(args)), record=not args.no_record)


if __name__ == "__main__":
    main()
