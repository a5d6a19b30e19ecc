"""Scale with run length: 10, 50 and 200 tool steps with large (8 KB) tool results, one durable run each.

A probe around the devhost engine's orchestrator invocation records every episode: the history it replays (events,
bytes), its largest single event, and how long the replay took (the SDK replays the whole history each episode).
Tool results live in the session store and activities return small summaries, so history events stay small; the
run continues as new every 8 model calls, so the history an episode replays stays bounded whatever the run length.
The `no continue-as-new` rows patch that limit away in the benchmark's host to show what it prevents.

    python -m bench.scale_bench [--steps 10,50,200] [--size 8192] [--no-record]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.checks import expect
from bench.report import command_line, median, percentile, publish, section, table
from bench.workload.brain import WorkloadBrain, blobs_prompt
from bench.workload.host import START_PATH, workload_host
from devhost.engine.episodes import dumps
from devhost.testing import InProcessHost
from scripted_model.server import ScriptedModelServer


@dataclass
class Episode:
    execution_id: str
    events: int
    history_bytes: int
    largest_event_bytes: int
    replay_ms: float


@dataclass
class EpisodeProbe:
    """Wraps the engine's per-episode orchestrator call (benchmark-only instrumentation, no engine change)."""

    episodes: list[Episode] = field(default_factory=list)

    def install(self, host: InProcessHost) -> None:
        runner = host.engine._rt.episodes  # white-box on purpose: the engine has no public per-episode hook
        original: Callable[..., Any] = runner._run_orchestrator

        async def probe(instance: Any, episode: Any) -> Any:
            # What the episode hands the orchestrator: the whole history so far and its new events.
            texts = [*(instance.history_texts or []), *(dumps(e) for e in episode.new_events)]
            started = time.perf_counter()
            result = await original(instance, episode)
            elapsed = (time.perf_counter() - started) * 1000
            sizes = [len(t.encode()) for t in texts]
            self.episodes.append(Episode(instance.row.execution_id, len(texts), sum(sizes), max(sizes), elapsed))
            return result

        runner._run_orchestrator = probe


def run_once(server: ScriptedModelServer, steps: int, size: int, workdir: Path, *, continue_as_new: bool) -> list:
    probe = EpisodeProbe()
    with workload_host(server.base_url, store_path=str(workdir / "s.sqlite3"), state_path=str(workdir / "e.sqlite3"),
                       clock="real") as host:
        if not continue_as_new:
            sys.modules["agent_runs.driver"].MODEL_CALLS_PER_EXECUTION = 10**9  # the host's import of the driver
        probe.install(host)
        started = time.perf_counter()
        view = host.client.post(START_PATH, json={"input": blobs_prompt(steps, size)}).json()
        status = host.wait_for_status(view["run_id"], timeout=600)
        wall = time.perf_counter() - started
        expect(status["runtimeStatus"] == "Completed", status)
        messages = host.client.get(f"/api/sessions/{view['session_id']}").json()["message_count"]
    episodes = probe.episodes
    last = episodes[-1]
    return [
        steps, "yes" if continue_as_new else "no", len({e.execution_id for e in episodes}), len(episodes), messages,
        max(e.history_bytes for e in episodes) / 1024, last.history_bytes / 1024,
        max(e.largest_event_bytes for e in episodes) / 1024, median([e.replay_ms for e in episodes]),
        percentile([e.replay_ms for e in episodes], 95), last.replay_ms, wall * 1000 / steps,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", default="10,50,200")
    parser.add_argument("--size", type=int, default=8192, help="bytes per tool result")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    rows = []
    with ScriptedModelServer(WorkloadBrain()) as server, tempfile.TemporaryDirectory() as tmp:
        for continue_as_new in (True, False):
            for steps in (int(s) for s in args.steps.split(",")):
                workdir = Path(tmp) / f"{steps}-{continue_as_new}"
                workdir.mkdir()
                rows.append(run_once(server, steps, args.size, workdir, continue_as_new=continue_as_new))
    body = table(
        ["tool steps", "continue-as-new", "executions", "episodes", "session messages", "max history KB / episode",
         "last episode history KB", "largest event KB", "replay ms p50", "replay ms p95", "last replay ms",
         "wall ms / step"],
        rows,
    )
    notes = (
        f"Each tool result is {args.size} bytes (stored in the session store, never in history). History = the "
        "events one episode replays (bytes of their JSON). Target: history bytes and replay time per episode flat "
        "in the run length -> compare the `yes` rows across step counts; the `no` rows show the growth that "
        "continue-as-new (every 8 model calls) prevents. `wall ms / step` grows with the run because every model "
        "call loads and sends the whole conversation (the model needs it), not because of durable overhead."
    )
    publish(section("Scale with run length", command_line("bench.scale_bench"), body, notes),
            record=not args.no_record)


if __name__ == "__main__":
    main()
