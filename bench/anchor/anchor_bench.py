"""The anchor side by side: Microsoft Agent Framework's `AgentFunctionApp` and this app, same devhost, same model.

Both serve an equivalent agent (same instructions, same `fetch_blob` tool) against the same scripted model server
(WorkloadBrain), for the same conversation: TURNS turns in one session, each `blobs 2 size 2000` (3 model calls,
2 tool calls). Per turn we record:
- latency to completion, observed on the engine (AF: the entity state holds the turn's response; ours: the run's
  orchestration completed), and as an HTTP client sees it (AF: `POST /api/agents/Worker/run`, which polls the entity
  every 1 s; ours: `POST /api/agents/worker/runs` with `wait_seconds`, which checks every 0.1 s);
- durable state bytes: AF's entity state (the whole conversation, rewritten on every turn) vs our orchestration
  history of the turn (plus its custom status); and the conversation bytes the turn added (AF: the state's growth;
  ours: the session-store messages of the run).

Needs bench/requirements-anchor.txt, in its own environment:  make test-agent-framework, then
.venv-agent-framework/bin/python -m bench.anchor.anchor_bench
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path
from typing import Any

from bench.checks import BenchmarkFailedError, expect
from bench.report import command_line, median, publish, section, table
from bench.workload.brain import WorkloadBrain, blobs_prompt
from bench.workload.host import close_app_services, workload_host
from devhost.testing import InProcessHost
from scripted_model.server import ScriptedModelServer

ANCHOR_DIR = Path(__file__).resolve().parent
PROMPT = blobs_prompt(2, 2000)
ENGINE_POLL_SECONDS = 0.002  # how often the benchmark reads the AF entity's committed state


def _json_bytes(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


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
            status = host.get_status(view["run_id"], show_history=True)
            if status is None:
                raise BenchmarkFailedError(f"run {view['run_id']} has no orchestration")
            durable = _json_bytes(status.get("historyEvents")) + _json_bytes(status.get("customStatus"))
            messages = host.client.get(f"/api/sessions/{session_id}/messages", params={"limit": 200}).json()
            added = sum(_json_bytes(m) for m in messages["messages"] if m.get("run_id") == view["run_id"])
            rows.append({"ms": elapsed * 1000, "state": durable, "added": added})
    close_app_services()
    return rows


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    rows = []
    growth = []
    with ScriptedModelServer(WorkloadBrain()) as server:
        for name, measure in (("AgentFunctionApp (AF 1.0.0b260922)", anchor_turns), ("this app", our_turns)):
            engine = measure(server.base_url, args.turns, False)
            http = measure(server.base_url, args.turns, True)
            rows.append([
                name, args.turns, median([r["ms"] for r in engine]), median([r["ms"] for r in http]),
                engine[0]["state"] / 1024, engine[-1]["state"] / 1024, median([r["added"] for r in engine]) / 1024,
            ])
            growth.append([name, *(f"{r['state'] / 1024:.1f}" for r in engine)])
    body = table(
        ["app", "turns", "turn ms p50 (engine)", "turn ms p50 (HTTP client)", "durable state KB, turn 1",
         f"durable state KB, turn {args.turns}", "conversation KB added / turn"],
        rows,
    )
    body += "\n\nDurable state KB after each turn (AF: entity state; this app: the turn's orchestration history):\n\n"
    body += table(["app", *(str(t) for t in range(1, args.turns + 1))], growth)
    notes = (
        f"Turn = `{PROMPT}` (3 model calls, 2 tool calls of 2,000-byte results), model latency 0 ms, one session. "
        "AF runs the whole turn (model and tools) inside one entity operation and keeps the whole conversation in "
        "the entity state, rewritten on every turn; its HTTP endpoint polls that state every 1 s. This app runs "
        "each step as an activity, keeps the conversation in the session store and the orchestration history "
        "small; its HTTP start checks every 0.1 s when asked to wait. Anchor installed only for this benchmark, "
        "in its own environment: `make test-agent-framework` builds it from bench/requirements-anchor.txt "
        "(agent-framework-azurefunctions==1.0.0b260922, agent-framework-openai 1.17.0); run with "
        "`.venv-agent-framework/bin/python -m bench anchor`."
    )
    publish(section("Anchor: AgentFunctionApp vs this app", command_line("bench.anchor.anchor_bench"), body, notes),
            record=not args.no_record)


if __name__ == "__main__":
    main()
