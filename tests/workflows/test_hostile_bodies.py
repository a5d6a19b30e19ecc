"""Hostile JSON bodies over real HTTP against devhost: JSON nested 1,000 deep, one level past the limit, a 5,000-digit
integer, `1e999`, `NaN`. Every route that reads a body (start run, fork, decide, `/v1/responses`, workflow start,
signal) answers 400 problem+json (OpenAI's error shape on `/v1/responses`) with a stable code, never a 500, and
writes nothing. What a route accepts the durable steps behind it take: a signal payload at the deepest accepted
nesting (before: 200 deep was accepted, then failed every retry of `workflow_record_signal`) and the largest accepted
integer travel through the workflow to its output.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import httpx
import pytest
from workflow_helpers import settle, start, view

from devhost.testing import InProcessHost

JSON = {"content-type": "application/json"}


def limits() -> Any:
    """The limits of the app the host loaded (test modules must not import the app's modules themselves)."""
    return sys.modules["agent_runtime.json_limits"]


def nested(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for index in range(levels):
        value = {"a": value} if index % 2 else [value]
    return value


def deep_text(levels: int) -> str:
    return "[" * levels + "1" + "]" * levels


def hostile_payloads() -> dict[str, tuple[str, str]]:
    """name -> (JSON text to put where a value goes, expected code); each body below is a JSON object around it."""
    depth = limits().MAX_JSON_DEPTH
    return {
        "1,000 deep": (deep_text(1000), "json_too_deep"),
        "one level past the limit": (deep_text(depth), "json_too_deep"),  # + the body's own object
        "5,000-digit integer": ("9" * 5000, "json_number_out_of_range"),
        "integer past the digits limit": ("1" * (limits().MAX_INTEGER_DIGITS + 1), "json_number_out_of_range"),
        "1e999": ("1e999", "json_number_out_of_range"),
        "NaN": ("NaN", "malformed_json"),
    }


@pytest.fixture
def targets(host: InProcessHost) -> dict[str, tuple[str, str]]:
    """route -> (path, body template with `@` where the hostile value goes)."""
    settle(host)
    waiting = host.client.post("/api/agents/assistant/runs", json={"input": "Please email bob about x"}).json()
    settle(host)
    run = host.client.get(f"/api/runs/{waiting['run_id']}").json()
    assert run["status"] == "requires_action", run
    approval_id = run["pending_approvals"][0]["approval_id"]
    workflow = start(host, "open_signal_flow", {"topic": "x"})["run_id"]
    settle(host)
    return {
        "start run": ("/api/agents/writer/runs", '{"input": "hi", "metadata": @}'),
        "fork": (f"/api/runs/{waiting['run_id']}/fork", '{"input": @}'),
        "decide": (f"/api/runs/{waiting['run_id']}/approvals/{approval_id}", '{"decision": "approve", "arguments": @}'),
        "responses": ("/api/v1/responses", '{"model": "writer", "input": "hi", "metadata": @}'),
        "workflow start": ("/api/workflows/open_signal_flow/runs", '{"input": @}'),
        "signal": (f"/api/workflows/runs/{workflow}/signals/go_ahead", '{"payload": @}'),
    }


def test_hostile_bodies_get_400_on_every_route_that_reads_one(
    host: InProcessHost, targets: dict[str, tuple[str, str]]
) -> None:
    runs_before = host.client.get("/api/runs").json()
    for route, (path, template) in targets.items():
        for name, (value, code) in hostile_payloads().items():
            response = host.client.post(path, content=template.replace("@", value).encode(), headers=JSON)
            assert response.status_code == 400, (route, name, response.status_code, response.text[:300])
            body = response.json()
            if route == "responses":
                assert response.headers["content-type"].startswith("application/json")
                assert body["error"]["type"] == "invalid_request_error" and body["error"]["code"] == code, body
            else:
                assert response.headers["content-type"].startswith("application/problem+json")
                assert (body["code"], body["field"]) == (code, "body"), (route, name, body)
            assert "Traceback" not in response.text
    assert host.client.get("/api/runs").json() == runs_before  # nothing started
    assert host.client.get("/api/health").status_code == 200


def test_what_the_signal_route_accepts_the_workflow_takes(host: InProcessHost) -> None:
    """The deepest payload the edge accepts and the largest integer reach the workflow's output through the store,
    the durable steps and history; one level deeper is refused at the edge (the step could not take 200)."""
    depth, digits = limits().MAX_JSON_DEPTH, limits().MAX_INTEGER_DIGITS
    deepest = nested(depth - 1, leaf=int("9" * digits))  # + the body's own object = the limit
    run_id = start(host, "open_signal_flow", {"topic": "x"})["run_id"]
    settle(host)
    path = f"/api/workflows/runs/{run_id}/signals/go_ahead"
    too_deep = host.client.post(path, content=json.dumps({"payload": nested(depth)}).encode(), headers=JSON)
    assert too_deep.status_code == 400 and too_deep.json()["code"] == "json_too_deep"
    assert host.client.post(path, json={"payload": {"first": True}}).status_code == 202
    settle(host)
    host.advance(3601)
    accepted = host.client.post(path, content=json.dumps({"payload": deepest}).encode(), headers=JSON)
    assert accepted.status_code == 202, accepted.text
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "completed", done
    assert done["output"]["second"] == deepest


def test_a_start_run_body_at_the_limits_runs(host: InProcessHost) -> None:
    depth = limits().MAX_JSON_DEPTH
    body = {"input": "hi", "metadata": {"deep": json.dumps(nested(depth + 10))}}  # deep text inside a string is fine
    response = host.client.post("/api/agents/writer/runs", json=body)
    assert response.status_code in (200, 202), response.text
    settle(host)
    assert httpx.get(f"{host.base_url}/api/health", timeout=10, trust_env=False).status_code == 200
