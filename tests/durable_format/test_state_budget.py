"""The durable state of a run stays small and flat: the anchor benchmark's scenario, counted in bytes (deterministic).

`python -m bench anchor` compares this app with Microsoft's `AgentFunctionApp` on ten turns of `blobs 2 size 2000`
(3 model calls, 2 tool calls of 2,000-byte results) in one session: AF keeps the whole conversation in its entity
state (53,238 bytes after turn 10); we keep it in the session store and the orchestration history holds references.
The target is >= 10x smaller at turn 10, so the history of turn 10 (inputs and results of every activity, each
payload once as stored, plus the custom status: `bench/anchor/state_bytes.py`) must stay within 5,300 bytes; and it
must not grow with the session (turn 10 no larger than turn 1 plus the few digits positions gain).
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.anchor.anchor_bench import PROMPT, run_status
from bench.anchor.state_bytes import durable_state_bytes
from bench.workload.brain import WorkloadBrain
from bench.workload.host import workload_host
from scripted_model.server import ScriptedModelServer

AF_STATE_AT_TURN_10 = 53_238  # bytes, bench/RESULTS.md "Anchor" (the entity state grows ~5.2 KB a turn)
STATE_BUDGET_BYTES = 5_300  # <= AF_STATE_AT_TURN_10 / 10
TURNS = 10


@pytest.mark.slow
def test_the_history_of_turn_10_is_ten_times_smaller_than_agent_framework_state() -> None:
    sizes: list[int] = []
    with ScriptedModelServer(WorkloadBrain()) as server, workload_host(server.base_url) as host:
        session_id: str | None = None
        for _ in range(TURNS):
            body: dict[str, Any] = {"input": PROMPT, **({"session_id": session_id} if session_id else {})}
            view = host.client.post("/api/agents/worker/runs", json=body).json()
            session_id = view["session_id"]
            assert host.wait_for_status(view["run_id"], timeout=60)["runtimeStatus"] == "Completed"
            sizes.append(durable_state_bytes(run_status(host, view["run_id"])))
    assert STATE_BUDGET_BYTES * 10 <= AF_STATE_AT_TURN_10
    assert sizes[-1] <= STATE_BUDGET_BYTES, sizes
    assert sizes[-1] <= sizes[0] + 64, sizes  # flat in the session's length
