"""The anchor side by side: Microsoft Agent Framework's `AgentFunctionApp` and this app, same devhost, same model.

Both serve an equivalent agent (same instructions, same `fetch_blob` tool) against the same scripted model server
(WorkloadBrain), for the same conversation: TURNS turns in one session, each `blobs 2 size 2000` (3 model calls,
2 tool calls). Per turn we record:
- latency to completion, observed on the engine (AF: the entity state holds the turn's response; ours: the run's
  orchestration completed), and as an HTTP client sees it (AF: `POST /api/agents/Worker/run`, which polls the entity
  every 1 s; ours: `POST /api/agents/worker/runs` with `wait_seconds`, which checks every 0.1 s);
- durable state bytes: AF's entity state (the whole conversation, rewritten on every turn) vs our orchestration
  history of the turn with its activities' inputs and results (plus its custom status; `state_bytes.py`); and the
  conversation bytes the turn added (AF: the state's growth; ours: the session-store messages of the run).

Each app runs ROUNDS conversations (default 3), the apps taking turns, and each turn's figures are the medians over
them: one turn's time varies by tens of percent between runs on a shared VM.

One command runs both, each in a process of its own environment (the anchor needs bench/requirements-anchor.txt in
`.venv-agent-framework`: `make test-agent-framework` builds it):  python -m bench anchor
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench.anchor.state_bytes import durable_state_bytes, json_bytes
from bench.checks import BenchmarkFailedError, expect
from bench.report import command_line, median, publish, section, table
from bench.workload.brain import WorkloadBrain, blobs_prompt
from bench.workload.host import close_app_services, workload_host
from devhost.testing import InProcessHost
from scripted_model.server import ScriptedModelServer

ANCHOR_DIR = Path(__file__).resolve().parent
PROMPT = blobs_prompt(2, 2000)
ENGINE_POLL_SECONDS = 0.002  # how often the benchmark reads the AF entity's committed state


def anchor_turns(model_url: str, turns: int, via_http: bool) -> list[dict[str, float]]:
    env = {"OPENAI_BASE_URL": model_url, "OPENAI_API_KEY": "not-used", "OPENAI_MODEL": "scripted"}
    session = uuid.uuid4().hex
    rows: list[dict[str, float]] = []
    with InProcessHost(ANCHOR_DIR, clock="real", env=env) as host:
        host.client.post("/api/agents/Worker/run", json={"message": "warm up", "session_id": "warm-up"}, timeout=60)
        previous = 0
        for turn in range(1, turns + 1):
            started = time.perf_counter()
            if via_http:
                response = host.client.post("/api/agents/Worker/run", json={"message": PROMPT, "session_id": session},
                                            timeout=60)
                expect(response.status_code == 200 and response.json()["status"] == "success", response.text)
            else:
                response = host.client.post("/api/agents/Worker/run", json={"message": PROMPT, "session_id": session},
                                            headers={"x-ms-wait-for-response": "false"})
                expect(response.status_code == 202, response.text)
                _wait_for_responses(host, session, turn)
            elapsed = time.perf_counter() - started
            state = host.run(host.engine.read_entity("dafx-Worker", session))
            if state is None or state.state_json is None:
                raise BenchmarkFailedError(f"the AF entity of session {session} has no state after turn {turn}")
            size = len(state.state_json.encode())
            rows.append({"ms": elapsed * 1000, "state": size, "added": size - previous})
            previous = size
    return rows


def _wait_for_responses(host: InProcessHost, session: str, count: int, deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        state = host.run(host.engine.read_entity("dafx-Worker", session))
        if state is not None and state.state_json:
            history = json.loads(state.state_json)["data"]["conversationHistory"]
            if sum(1 for entry in history if entry["$type"] == "response") >= count:
                return
        time.sleep(ENGINE_POLL_SECONDS)
    raise TimeoutError(f"the AF entity did not answer turn {count} within {deadline_s}s")


def our_turns(model_url: str, turns: int, via_http: bool) -> list[dict[str, float]]:
    rows: list[dict[str, float]] = []
    with workload_host(model_url) as host:
        _our_turn(host, None, via_http=False)  # warm-up
        session_id = None
        for _ in range(turns):
            started = time.perf_counter()
            view = _our_turn(host, session_id, via_http=via_http)
            elapsed = time.perf_counter() - started
            session_id = view["session_id"]
            durable = durable_state_bytes(run_status(host, view["run_id"]))
            messages = host.client.get(f"/api/sessions/{session_id}/messages", params={"limit": 200}).json()
            added = sum(json_bytes(m) for m in messages["messages"] if m.get("run_id") == view["run_id"])
            rows.append({"ms": elapsed * 1000, "state": durable, "added": added})
    close_app_services()
    return rows


def run_status(host: InProcessHost, run_id: str) -> dict[str, Any]:
    """The run's orchestration status with its whole history, inputs and outputs (`durable_state_bytes` counts it)."""
    status = host.run(host.engine.get_status(run_id, show_history=True, show_history_output=True))
    if status is None:
        raise BenchmarkFailedError(f"run {run_id} has no orchestration")
    return dict(status.to_json())


def _our_turn(host: InProcessHost, session_id: str | None, *, via_http: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"input": PROMPT, "wait_seconds": 30 if via_http else 0}
    if session_id:
        body["session_id"] = session_id
    response = host.client.post("/api/agents/worker/runs", json=body, timeout=60)
    expect(response.status_code in (200, 202), response.text)
    view = response.json()
    if via_http:
        expect(view["status"] == "completed", view["status"])
    else:
        status = host.wait_for_status(view["run_id"], timeout=60)
        expect(status["runtimeStatus"] == "Completed", status)
    return view


SIDES = {
    "anchor": ("AgentFunctionApp (AF 1.0.0b260922)", anchor_turns),
    "ours": ("this app", our_turns),
}
ANCHOR_PYTHON = ANCHOR_DIR.parents[1] / ".venv-agent-framework" / "bin" / "python"


def run_side(side: str, model_url: str, turns: int) -> dict[str, list[dict[str, float]]]:
    """One app's turns, engine-observed then HTTP-observed (in this process: the side's own environment)."""
    measure = SIDES[side][1]
    return {"engine": measure(model_url, turns, False), "http": measure(model_url, turns, True)}


def side_in_its_environment(side: str, model_url: str, turns: int) -> dict[str, list[dict[str, float]]]:
    """Run `side` in a process of its own environment: the anchor in `.venv-agent-framework` (Agent Framework's
    dependencies must not meet the app's), this app in the interpreter running the benchmark."""
    python = str(ANCHOR_PYTHON) if side == "anchor" else sys.executable
    if side == "anchor" and not ANCHOR_PYTHON.exists():
        raise BenchmarkFailedError("no .venv-agent-framework: build it with `make test-agent-framework`")
    done = subprocess.run(
        [python, "-m", "bench.anchor.anchor_bench", "--side", side, "--model-url", model_url, "--turns", str(turns)],
        cwd=ANCHOR_DIR.parents[1], capture_output=True, text=True, timeout=1800,
    )
    if done.returncode != 0:
        raise BenchmarkFailedError(f"the {side} side failed:\n{done.stderr[-4000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3,
                        help="conversations per app, the apps taking turns; each turn's figures are the medians")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--side", choices=sorted(SIDES), help="run one side here and print its rows as JSON")
    parser.add_argument("--model-url", help="with --side: the scripted model server to use")
    args = parser.parse_args()
    if args.side:
        print(json.dumps(run_side(args.side, args.model_url, args.turns)))
        return
    rounds: dict[str, list[dict[str, list[dict[str, float]]]]] = {side: [] for side in SIDES}
    with ScriptedModelServer(WorkloadBrain()) as server:
        for _ in range(args.rounds):  # the apps take turns: a VM whose speed drifts slows both alike
            for side in SIDES:
                rounds[side].append(side_in_its_environment(side, server.base_url, args.turns))
    measured = {side: medians_per_turn(runs) for side, runs in rounds.items()}
    notes = f"{NOTES} Each app ran {args.rounds} conversations, the apps taking turns; every figure of a turn is " \
            "the median over them (one turn's time varies by tens of percent from one run to the next on this VM)."
    publish(section("Anchor: AgentFunctionApp vs this app", command_line("bench.anchor.anchor_bench"),
                    report(measured, args.turns), notes),
            record=not args.no_record)


def medians_per_turn(runs: list[dict[str, list[dict[str, float]]]]) -> dict[str, list[dict[str, float]]]:
    """One conversation's rows made of several: each turn's every figure is its median over `runs`."""
    return {
        kind: [
            {key: median([run[kind][turn][key] for run in runs]) for key in runs[0][kind][turn]}
            for turn in range(len(runs[0][kind]))
        ]
        for kind in runs[0]
    }


def report(measured: dict[str, dict[str, list[dict[str, float]]]], turns: int) -> str:
    rows, growth = [], []
    for side, (name, _) in SIDES.items():
        engine, http = measured[side]["engine"], measured[side]["http"]
        rows.append([
            name, turns, median([r["ms"] for r in engine]), median([r["ms"] for r in http]),
            engine[0]["state"] / 1024, engine[-1]["state"] / 1024, median([r["added"] for r in engine]) / 1024,
        ])
        growth.append([name, *(f"{r['state'] / 1024:.1f}" for r in engine)])
    body = table(
        ["app", "turns", "turn ms p50 (engine)", "turn ms p50 (HTTP client)", "durable state KB, turn 1",
         f"durable state KB, turn {turns}", "conversation KB added / turn"],
        rows,
    )
    body += "\n\nDurable state KB after each turn (AF: entity state; this app: the turn's orchestration history):\n\n"
    body += table(["app", *(str(t) for t in range(1, turns + 1))], growth)
    anchor, ours = measured["anchor"], measured["ours"]
    ratio_rows = []
    for t in range(turns):
        ratio_rows.append([
            t + 1,
            anchor["engine"][t]["state"] / max(ours["engine"][t]["state"], 1),
            ours["engine"][t]["ms"] / max(anchor["engine"][t]["ms"], 1e-9),
            ours["http"][t]["ms"] / max(anchor["http"][t]["ms"], 1e-9),
        ])
    body += "\n\nRatios per turn (state: AF / ours, higher is smaller for us; times: ours / AF, below 1 is faster):\n\n"
    body += table(["turn", "state bytes AF / ours", "engine turn time ours / AF", "HTTP answer time ours / AF"],
                  ratio_rows)
    last = ratio_rows[-1]
    slower = [r[0] for r in ratio_rows if r[2] > 1 or r[3] > 1]
    body += (
        f"\n\nTargets: state >= 10x smaller at turn {turns}: {'met' if last[1] >= 10 else 'NOT met'} "
        f"({last[1]:.1f}x); ours no slower per turn: {'met' if not slower else 'NOT met, turns ' + str(slower)}."
    )
    return body


NOTES = (
    f"Turn = `{PROMPT}` (3 model calls, 2 tool calls of 2,000-byte results), model latency 0 ms, one session. "
    "AF runs the whole turn (model and tools) inside one entity operation and keeps the whole conversation in "
    "the entity state, rewritten on every turn; its HTTP endpoint polls that state every 1 s. This app runs "
    "each step as an activity, keeps the conversation in the session store and the orchestration history "
    "small; its HTTP start checks every 0.1 s when asked to wait. Our durable state counts the turn's whole "
    "history with its activities' inputs and results, each payload once as stored (`bench/anchor/state_bytes.py`; "
    "runs before 2026-11-25 21:45 UTC counted the inputs escaped twice and no results). "
    "Each app runs in a process of its own environment "
    "(AF: `.venv-agent-framework`, built by `make test-agent-framework` from bench/requirements-anchor.txt: "
    "agent-framework-azurefunctions==1.0.0b260922, agent-framework-openai; this app: the interpreter running the "
    "benchmark), on the same devhost code and the same scripted model server (started by the benchmark). "
    "Run: `python -m bench anchor`."
)


if __name__ == "__main__":
    main()
