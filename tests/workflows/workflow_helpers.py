"""Small HTTP helpers for the workflow tests (every call goes through the app's real routes)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx

from devhost.testing import InProcessHost

# Waits for progress only bound a failure; a loaded 2-core CI machine runs several times slower than a laptop.
PROGRESS_TIMEOUT_S = 120.0


def expected_status_code(view: dict[str, Any]) -> int:
    """202 while running, 200 once completed or cancelled, 500 (the view says which step failed) when failed."""
    if view["status"] == "failed":
        return 500
    return 200 if view["status"] in ("completed", "cancelled") else 202


def start(host: Any, name: str, workflow_input: dict[str, Any], **body: Any) -> dict[str, Any]:
    response = host.client.post(f"/api/workflows/{name}/runs", json={"input": workflow_input, **body})
    assert response.status_code == expected_status_code(response.json()), response.text
    return response.json()


def view(host: Any, run_id: str, **params: Any) -> dict[str, Any]:
    response = host.client.get(f"/api/workflows/runs/{run_id}", params=params)
    assert response.status_code == expected_status_code(response.json()), response.text
    return response.json()


def settle(host: InProcessHost) -> None:
    """Run everything runnable (child runs, activities) without moving the virtual clock."""
    host.wait_until_idle(timeout=PROGRESS_TIMEOUT_S)


def decide(host: Any, run_id: str, approval_id: str, decision: str = "approve", **headers: str) -> dict[str, Any]:
    response = host.client.post(
        f"/api/runs/{run_id}/approvals/{approval_id}", json={"decision": decision}, headers=headers
    )
    assert response.status_code == 202, response.text
    return response.json()


def step_ids(workflow_view: dict[str, Any]) -> list[str]:
    return [entry["step"] for entry in workflow_view["steps"]]


def model_prompts(model: Any, system_fragment: str) -> list[str]:
    """The last user message of every model request made for the agent whose instructions contain the fragment."""
    prompts = []
    for request in model.log.requests:
        messages = request.messages
        system = " ".join(str(m.get("content")) for m in messages if m.get("role") in ("system", "developer"))
        if system_fragment in system:
            users = [str(m.get("content")) for m in messages if m.get("role") == "user"]
            prompts.append(users[-1] if users else "")
    return prompts


def child_run(host: Any, run_id: str, session_id: str) -> dict[str, Any]:
    """A child run as the session routes show it (GET /api/runs/{id} on this branch's base has a bug fixed on the
    `runs` branch: `runs.get_run` misses `return_on_updates`)."""
    session = host.client.get(f"/api/sessions/{session_id}")
    assert session.status_code == 200, session.text
    return next(run for run in session.json()["runs"] if run["run_id"] == run_id)


def start_posting_first(
    host: Any, monkeypatch: Any, name: str, workflow_input: dict[str, Any], *posts: Callable[[str], tuple[str, Any]]
) -> tuple[str, list[httpx.Response]]:
    """Start a workflow, sending each post (its path and JSON body for the run id), through the API, from inside the
    start request's launch: the workflow's record exists but its orchestration does not yet. Returns the run id and
    the posts' answers, in order."""
    gateway = sys.modules["http_api.workflow_gateway"].WorkflowGateway  # as the host loaded the app
    start_orchestration = gateway.start
    answers: list[httpx.Response] = []

    async def post_first(self: Any, launched: Any) -> None:
        async with httpx.AsyncClient(base_url=host.base_url, trust_env=False) as client:
            for post in posts:
                path, body = post(launched.ref.run_id)
                answers.append(await client.post(path, json=body))
        await start_orchestration(self, launched)

    monkeypatch.setattr(gateway, "start", post_first)
    try:
        run_id = start(host, name, workflow_input)["run_id"]
    finally:
        monkeypatch.undo()
    return run_id, answers


def flagged_while_closing(monkeypatch: Any, run_id: str) -> None:
    """The cancel route's flag (its first write, before it answers 202) lands after the workflow's last step read the
    flag and before `workflow_finish` writes the close it was asked for: the cancel event is still on its way."""
    store = sys.modules["agent_runs.services"].RunServices.current().store  # the host's modules: the app's store
    flag_cancel = sys.modules["agent_runs.run_status"].flag_cancel
    finish_run = store.finish_run

    async def flagging_first(finished_id: str, *args: Any, **kwargs: Any) -> Any:
        if finished_id == run_id:
            open_record = await store.get_run(run_id)
            assert open_record is not None and not open_record.finished
            assert await flag_cancel(store, open_record, datetime.now(UTC)) is None  # flagged: the route's 202
        return await finish_run(finished_id, *args, **kwargs)

    monkeypatch.setattr(store, "finish_run", flagging_first)
