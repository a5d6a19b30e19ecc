"""Durable overhead: the same multi-turn conversation through the in-process runner and as durable runs on devhost.

A conversation is 3 turns in one session (fresh session per conversation, so the figures do not depend on how long the
benchmark runs); each turn is `blobs 2 size 200`: 3 model calls + 2 tool calls = 5 steps. The in-process baseline is
`agent_runtime.runner.AgentRunner` with an in-memory conversation, streaming its model calls as the durable side does
by default (`STREAM_PARTIAL_OUTPUT=true`; until 2026-11-29 it asked for whole answers, 0.6 M instructions a turn
fewer); the durable side starts each turn over HTTP and waits (event-driven, on the engine) until its orchestration
completes: the store writes, activities, history and orchestrator replays are what it adds. Both use the real `openai`
client against the scripted model server (in a process of its own, as a model service is:
`bench/workload/model_process.py`), with 0 ms and 50 ms model latency; the two sides take turns, a conversation each,
so a machine whose speed drifts slows both alike. The durable side's HTTP client runs in a process of its own too
(`bench/workload/client_process.py`): a client sharing the host's GIL would add its own work to every turn, which no
deployment does.
Targets: durable adds <= 2.5 ms median per step at 0 ms model latency, and
the app's own code (orchestrator, activities, HTTP handlers: `bench/cpu_breakdown.py` splits the host's CPU between
them, the Durable SDK and devhost's engine) spends <= 1.5 ms CPU per step. The host's CPU is also given per thread
(exact): the event loop (HTTP, engine, activities), the orchestrator episodes (sync pool), the session store's thread.

    python -m bench.overhead_bench [--conversations 10] [--no-record]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from agent_runtime.messages import ChatResponseUpdate
from agent_runtime.models.retrying import RetryingModelClient
from agent_runtime.runner import AgentRunner
from agent_runtime.settings import ModelSettings, build_model_client
from bench.checks import expect
from bench.cpu_breakdown import CLIENT_THREAD, Sampler, by_thread_role, thread_cpu
from bench.report import command_line, median, percentile, publish, section, table
from bench.workload.agents.worker import worker
from bench.workload.brain import blobs_prompt
from bench.workload.client_process import ClientProcess, client_process
from bench.workload.host import START_PATH, workload_host
from bench.workload.model_process import model_server_process
from devhost.testing import InProcessHost

STEPS_PER_TURN = 5
TURNS_PER_CONVERSATION = 3
PROMPT = blobs_prompt(2, 200)
TARGET_ADDED_MS_PER_STEP = 2.5
TARGET_APP_CPU_MS_PER_STEP = 1.5
APP_OWNERS = ("app: orchestrator", "app: activities", "app: HTTP", "app: other")


class LiveText:
    """What a caller of an in-process run keeps of each streamed answer: the text so far, as a page showing it does."""

    def __init__(self) -> None:
        self.text = ""

    async def on_update(self, update: ChatResponseUpdate) -> None:
        self.text += update.text


class InProcessSide:
    """The in-process runner on a loop of its own (one model client, kept across conversations). Its model calls
    stream, as the durable side's do by default (`STREAM_PARTIAL_OUTPUT=true`: pollers see the text so far), so the
    difference between the sides is durability, not streaming."""

    def __init__(self, model_url: str) -> None:
        self.loop = asyncio.new_event_loop()
        settings = ModelSettings()
        self._inner = build_model_client(settings, scripted_base_url=model_url)
        self._client = RetryingModelClient(self._inner, settings.retry_policy())
        self._live = LiveText()
        self.loop.run_until_complete(self._runner().run(PROMPT))  # warm-up: connections, imports

    def _runner(self, session_id: str | None = None) -> AgentRunner:
        return AgentRunner(worker, self._client, session_id=session_id, on_update=self._live.on_update)

    def conversation(self, index: int) -> list[float]:
        return self.loop.run_until_complete(self._conversation(index))

    async def _conversation(self, index: int) -> list[float]:
        runner = self._runner(f"bench-{index}")
        times = []
        for _ in range(TURNS_PER_CONVERSATION):
            started = time.perf_counter()
            result = await runner.run(PROMPT)
            times.append(time.perf_counter() - started)
            expect(result.status == "completed", result.reason)
        return times

    def close(self) -> None:
        self.loop.run_until_complete(self._inner.aclose())
        self.loop.close()


def durable_conversation(host: InProcessHost, client: ClientProcess | None = None) -> list[float]:
    times, session_id = [], None
    for _ in range(TURNS_PER_CONVERSATION):
        started = time.perf_counter()
        session_id = _durable_turn(host, session_id, client)
        times.append(time.perf_counter() - started)
    return times


def interleaved_turns(model_url: str, conversations: int, workdir: Path) -> tuple[list[float], list[float]]:
    """Turn times of both sides, one conversation of each in turn: a machine whose speed drifts during the run (a
    shared VM does) slows both alike, so the difference stays the durable overhead."""
    workdir.mkdir(parents=True, exist_ok=True)
    store, state = str(workdir / "sessions.sqlite3"), str(workdir / "engine.sqlite3")
    in_process = InProcessSide(model_url)
    try:
        with workload_host(model_url, store_path=store, state_path=state) as host, \
                client_process(host.base_url) as client:
            _durable_turn(host, None, client)  # warm-up: imports, store, model clients
            baseline: list[float] = []
            durable: list[float] = []
            for index in range(conversations):
                baseline += in_process.conversation(index)
                durable += durable_conversation(host, client)
            return baseline, durable
    finally:
        in_process.close()


def _durable_turn(host: InProcessHost, session_id: str | None, client: ClientProcess | None = None) -> str:
    """Start one turn over HTTP and wait for its orchestration to complete; returns the session id. `client`: the
    benchmark's client process (`client_process`), else the host's own client, in this process (then its work
    shares the host's GIL)."""
    body = {"input": PROMPT, **({"session_id": session_id} if session_id else {})}
    if client is not None:
        answer = client.post(START_PATH, body)
        expect(answer.status_code in (200, 202), answer.text)
        view = answer.body
    else:
        response = host.client.post(START_PATH, json=body)
        expect(response.status_code in (200, 202), response.text)
        view = response.json()
    status = host.wait_for_status(view["run_id"], timeout=60)
    expect(status["runtimeStatus"] == "Completed", status)
    return view["session_id"]


def cpu_breakdown(model_url: str, turns: int, workdir: Path) -> tuple[dict[str, float], float, dict[str, float]]:
    """CPU ms per step over `turns` durable turns (fresh sessions) at the server's latency: by owner, the host's
    total, and by thread. The total and the threads are exact (`/proc`) over turns run without the sampler; the
    owners split that total in the shares the sampler saw over as many turns again (sampling costs CPU itself)."""
    workdir.mkdir(parents=True, exist_ok=True)
    store, state = str(workdir / "sessions.sqlite3"), str(workdir / "engine.sqlite3")
    with workload_host(model_url, store_path=store, state_path=state) as host, \
            client_process(host.base_url) as client:
        _durable_turn(host, None, client)  # warm-up
        before = thread_cpu()
        for _ in range(turns):
            _durable_turn(host, None, client)
        threads = by_thread_role(before, thread_cpu())
        with Sampler().running() as sampler:
            for _ in range(turns):
                _durable_turn(host, None, client)
    steps = turns * STEPS_PER_TURN
    host_cpu = sum(cpu for role, cpu in threads.items() if role != CLIENT_THREAD)
    sampled = sampler.cpu_seconds or 1.0
    return ({owner: host_cpu * cpu / sampled * 1000 / steps for owner, cpu in sampler.shares().items()},
            host_cpu * 1000 / steps,
            {role: cpu * 1000 / steps for role, cpu in threads.items() if cpu > 0})


def measure(conversations: int) -> list[list[object]]:
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for latency in (0.0, 50.0):
            with model_server_process(latency) as model_url:
                baseline, durable = interleaved_turns(model_url, conversations, Path(tmp) / f"lat{int(latency)}")
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
    with model_server_process() as model_url, tempfile.TemporaryDirectory() as tmp:
        shares, total, threads = cpu_breakdown(model_url, args.conversations * TURNS_PER_CONVERSATION, Path(tmp))
    app_cpu = sum(shares.get(owner, 0.0) for owner in APP_OWNERS)
    body = table(
        ["model latency", "turns", "in-process turn ms (p50)", "durable turn ms (p50)", "durable turn ms (p95)",
         "added ms per turn", "added ms per step", "ratio"],
        rows,
    )
    body += ("\n\nHost CPU per step at 0 ms model latency, by owner (the exact total split in sampled shares; "
             "`bench/cpu_breakdown.py`):\n\n")
    body += table(["owner", "CPU ms per step"], [*([o, v] for o, v in shares.items()), ["all (host process)", total]])
    body += "\n\nHost CPU per step by thread (exact, from `/proc`):\n\n"
    body += table(["thread", "CPU ms per step"], [[r, v] for r, v in threads.items()])
    added = next(row[6] for row in rows if row[0] == "0 ms")
    body += (
        f"\n\nTargets: durable adds <= {TARGET_ADDED_MS_PER_STEP} ms per step (p50, 0 ms model): "
        f"{'met' if added <= TARGET_ADDED_MS_PER_STEP else 'NOT met'} ({added:.2f} ms); app code <= "
        f"{TARGET_APP_CPU_MS_PER_STEP} ms CPU per step: {'met' if app_cpu <= TARGET_APP_CPU_MS_PER_STEP else 'NOT met'}"
        f" ({app_cpu:.2f} ms: {', '.join(f'{o} {shares.get(o, 0.0):.2f}' for o in APP_OWNERS)})."
    )
    notes = (
        f"One turn = `{PROMPT}` = {STEPS_PER_TURN} steps (3 model calls, 2 tool calls); the durable run also records "
        "and finishes the run (store + activities). Durable turns are timed from the HTTP start to the orchestration's "
        "completion on the engine (no client polling interval). The CPU breakdown charges library code (pydantic, "
        "sqlite3, json) to the app code that called it; the model client's SDK stack (openai, httpx) is an owner of "
        "its own, not app code: the in-process runner spends the same on each model call."
    )
    publish(section("Durable overhead vs the in-process runner", command_line("bench.overhead_bench"), body, notes),
            record=not args.no_record)


if __name__ == "__main__":
    main()
