"""Record `golden/agent_run_histories.jsonl.gz`: whole `agent_run` histories as the code checked out wrote them.

Run from the root of the checkout whose payload shapes you want to keep readable (the committed file was recorded
at c079d03, before `agent_runs.wire` left default fields out):

    cd tests/durable_format && PYTHONPATH=../.. python record_agent_run_histories.py golden/agent_run_histories.jsonl.gz

Cases: a 5-step run starting a session (3 model calls, 2 tool calls), the session's next run, and a run whose tool
call waits for an approval (an external event raced with a timer) that is then given.
"""

from __future__ import annotations

import gzip
import json
import sys
from typing import Any

from bench.workload.brain import WorkloadBrain, blobs_prompt, email_prompt
from bench.workload.host import workload_host
from devhost.testing import InProcessHost
from scripted_model.server import ScriptedModelServer


def _run(host: InProcessHost, prompt: str, session_id: str | None = None, approve: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"input": prompt, **({"session_id": session_id} if session_id else {})}
    view = host.client.post("/api/agents/worker/runs", json=body).json()
    run_id = view["run_id"]
    if approve:
        for _ in range(200):
            view = host.client.get(f"/api/runs/{run_id}", params={"wait_seconds": 1}).json()
            if view["status"] == "requires_action":
                break
        approval_id = view["pending_approvals"][0]["approval_id"]
        decided = host.client.post(f"/api/runs/{run_id}/approvals/{approval_id}", json={"decision": "approve"})
        assert decided.status_code == 202, decided.text
    status = host.wait_for_status(run_id, timeout=60)
    assert status["runtimeStatus"] == "Completed", status
    runtime = host.engine._rt  # the engine's own record of the instance: the history exactly as stored
    instance = runtime.instances[run_id]
    runtime.episodes.ensure_history(instance)
    return {"instance_id": run_id, "session_id": view["session_id"], "input": instance.row.input,
            "history": instance.history}


def main(out: str) -> None:
    with ScriptedModelServer(WorkloadBrain()) as server, workload_host(server.base_url) as host:
        first = _run(host, blobs_prompt(2, 200))
        cases = [
            {"case": "five_steps_new_session", **first},
            {"case": "five_steps_next_run", **_run(host, blobs_prompt(2, 200), first["session_id"])},
            {"case": "approval", **_run(host, email_prompt("bob@example.com"), approve=True)},
        ]
    with gzip.open(out, "wt", encoding="utf-8") as lines:
        for case in cases:
            lines.write(json.dumps(case) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
