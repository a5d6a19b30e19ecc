"""Durable overhead: the same multi-turn conversation through the in-process runner and as durable runs on devhost.

A conversation is 3 turns in one session (fresh session per conversation, so the figures do not depend on how long
the benchmark runs); each turn is `blobs 2 size 200`: 3 model calls + 2 tool calls = 5 steps. The in-process baseline
is `agent_runtime.runner.AgentRunner` with an in-memory conversation; the durable side starts each turn over HTTP and
waits (event-driven, on the engine) until its orchestration completes: the store writes, activities,
history and orchestrator replays are what it adds. Both use the real `openai` client against the scripted model
server, with 0 ms and 50 ms model latency. Target: durable adds < 10 ms median per step.

    python -m bench.overhead_bench [--conversations 10] [--no-record]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from agent_runtime.models.retrying import RetryingModelClient
from agent_runtime.runner import AgentRunner
from agent_runtime.settings import ModelSettings, build_model_client
from bench.checks import expect
from bench.report import command_line, median, percentile, publish, section, table
from bench.workload.agents.worker import worker
from bench.workload.brain import WorkloadBrain, blobs_prompt
from bench.workload.host import workload_host
from devhost.testing import InProcessHost
from scripted_model.server import ScriptedModelServer

STEPS_PER_TURN = 5
TURNS_PER_CONVERSATION = 3
PROMPT = blobs_prompt(2, 200)


async def in_process_turns(model_url: str, conversations: int) -> list[float]:
    settings = ModelSettings()
    inner = build_model_client(settings, scripted_base_url=model_url)
    client = RetryingModelClient(inner, settings.retry_policy())
    try:
        await AgentRunner(worker, client).run(PROMPT)  # warm-up: connection pool, imports
        times = []
        for conversation in range(conversations):
            runner = AgentRunner(worker, client, session_id=f"bench-{conversation}")
            for _ in range(TURNS_PER_CONVERSATION):
                started = time.perf_counter()
                result = await runner.run(PROMPT)
                times.append(time.perf_counter() - started)
                expect(result.status == "completed", result.reason)
        return times
    finally:
        await inner.aclose()  # on this loop, before asyncio.run closes it


def durable_turns(model_url: str, conversations: int, workdir: Path) -> list[float]:
    workdir.mkdir(parents=True, exist_ok=True)
    store, state = str(workdir / "sessions.sqlite3"), str(workdir / "engine.sqlite3")
    with workload_host(model_url, store_path=store, state_path=state) as host:
        _durable_turn(host, None)  # warm-up: imports, store, model clients
        times = []
        for _ in range(conversations):
            session_id = None
            for _ in range(TURNS_PER_CONVERSATION):
                started = time.perf_counter()
                session_id = _durable_turn(host, session_id)
                times.append(time.perf_counter() - started)
        return times


def _durable_turn(host: InProcessHost, session_id: str | None) -> str:
    """Start one turn over HTTP and wait for its orchestration to complete; returns the session id."""
    body = {"input": PROMPT, **({"session_id": session_id} if session_id else {})}
    response = host.client.post("/api/agents/worker/runs", json=body)
    expect(response.status_code in (200, 202), response.text)
    view = response.json()
    status = host.wait_for_status(view["run_id"], timeout=60)
    expect(status["runtimeStatus"] == "Completed", status)
    return view["session_id"]


def measure(conversations: int) -> list[list[object]]:
    rows: list[list[object]] = []
    with ScriptedModelServer(WorkloadBrain()) as server, tempfile.TemporaryDirectory() as tmp:
        for latency in (0.0, 50.0):
            server.latency_ms = latency
            baseline = asyncio.run(in_process_turns(server.base_url, conversations))
            durable = durable_turns(server.base_url, conversations, Path(tmp) / f"lat{int(latency)}")
            base_ms, dur_ms = median(baseline) * 1000, median(durable) * 1000
            rows.append([
                f"{latency:.0f} ms", len(durable), base_ms, dur_ms, percentile([d * 1000 for d in durable], 95),
                dur_ms - base_ms, (dur_ms - base_ms) / STEPS_PER_TURN, dur_ms / base_ms,
            ])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    rows = measure(args.conversations)
    body = table(
        ["model latency", "turns", "in-process turn ms (p50)", "durable turn ms (p50)", "durable turn ms (p95)",
         "added ms per turn", "added ms per step", "ratio"],
        rows,
    )
    per_step = ", ".join(f"{row[0]}: {row[6]:.2f} ms" for row in rows)
    notes = (
        f"One turn = `{PROMPT}` = {STEPS_PER_TURN} steps (3 model calls, 2 tool calls); the durable run also records "
        "and finishes the run (store + activities). Durable turns are timed from the HTTP start to the orchestration's "
        "completion on the engine (no client polling interval). Target: durable adds < 10 ms median per step -> "
        f"{per_step}."
    )
    publish(section("Durable overhead vs the in-process runner", command_line("bench.overhead_bench"), body, notes),
            record=not args.no_record)


if __name__ == "__main__":
    main()
