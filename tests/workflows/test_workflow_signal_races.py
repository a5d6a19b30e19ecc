"""Signals that race the workflow's orchestration: one sent when the workflow's record exists but its orchestration
does not yet (the host answers its event with a 404). Timing is made exact from inside the app: the signal is sent,
through the API, from inside the start request's launch, before the orchestration is started."""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

import httpx
from workflow_helpers import settle, start, view


def test_a_signal_before_the_orchestration_started_is_accepted_and_taken(host, monkeypatch) -> None:
    """The signal is stored (the workflow's store probe finds it when it reaches its signal step), so the caller is
    told 202, not 500: a 500 would make it send the signal again, and the copy would feed the next step of that name."""
    gateway = sys.modules["http_api.workflow_gateway"].WorkflowGateway  # as the host loaded the app
    start_orchestration = gateway.start
    answers: list[httpx.Response] = []

    async def signal_first(self: Any, workflow_input: Any) -> None:
        run_id = workflow_input.ref.run_id
        async with httpx.AsyncClient(base_url=host.base_url, trust_env=False) as client:
            url = f"/api/workflows/runs/{run_id}/signals/data_ready"
            answers.append(await client.post(url, json={"payload": {"fact": "first"}}))
        await start_orchestration(self, workflow_input)

    monkeypatch.setattr(gateway, "start", signal_first)
    run_id = start(host, "signal_flow", {"at": (host.engine.now() + timedelta(hours=1)).isoformat()})["run_id"]
    monkeypatch.undo()

    [answer] = answers
    assert answer.status_code == 202, answer.text
    assert answer.json()["index"] == 1 and answer.json()["status"] == "accepted"
    settle(host)
    host.advance(3600)
    done = view(host, run_id)
    assert done["status"] == "completed" and done["output"]["fact"] == "first"
