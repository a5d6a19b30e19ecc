"""Large tool results never reach orchestration history: every event and the custom status stay under 16 KB."""

from __future__ import annotations

import json

from load_helpers import PROGRESS_TIMEOUT_S

from bench.workload.brain import blobs_prompt
from bench.workload.client import async_client, poll, session_messages, start_run
from bench.workload.host import workload_host
from scripted_model.server import ScriptedModelServer

BUDGET_BYTES = 16 * 1024
RESULT_BYTES = 200_000


async def test_large_tool_results_keep_history_events_small(model_server: ScriptedModelServer, store_path: str) -> None:
    with workload_host(model_server.base_url, store_path=store_path) as host:
        async with async_client(host.base_url) as client:
            view = await start_run(client, blobs_prompt(5, RESULT_BYTES))
            final, _ = await poll(client, view, deadline_s=PROGRESS_TIMEOUT_S)
            messages = await session_messages(client, view["session_id"])
        assert final["status"] == "completed", final
        results = [c for m in messages for c in m["contents"] if c["type"] == "function_result"]
        assert len(results) == 5 and all(len(r["result"]["data"]) == RESULT_BYTES for r in results)
        status = host.get_status(view["run_id"], show_history=True)
        assert status is not None
        sizes = [len(json.dumps(event).encode()) for event in status["historyEvents"]]
        assert max(sizes) < BUDGET_BYTES, max(sizes)
        assert sum(sizes) < 5 * BUDGET_BYTES  # the 1 MB of results live in the store, not in history
        assert len(json.dumps(status["customStatus"]).encode()) < BUDGET_BYTES
