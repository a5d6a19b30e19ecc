"""Caller errors, end to end: each gets its documented status as `application/problem+json` with a stable `code` and
the `field` at fault, and nothing is written to the store (a snapshot of every session, message, run, approval and
effect is the same before and after)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from e2e_harness import PROBLEM_JSON, InProcessApp, pending_ids, post_concurrently
from e2e_settings import TOKEN_SECRET

from agent_runtime.continuation import ContinuationTokens
from scripted_model import Reply, Script, ScriptedModelServer

RUNS = "/api/agents/helper/runs"
JSON = {"content-type": "application/json"}


@dataclass(frozen=True)
class BadRequest:
    name: str
    method: str
    path: str
    status: int
    code: str
    field: str | None
    json_body: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def send(self, client: httpx.Client) -> httpx.Response:
        if self.content is not None:
            return client.request(self.method, self.path, content=self.content, headers=self.headers)
        return client.request(self.method, self.path, json=self.json_body, headers=self.headers)


def assert_problem(response: httpx.Response, status: int, code: str, field: str | None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM_JSON)
    problem = response.json()
    assert (problem["status"], problem["code"], problem.get("field")) == (status, code, field), problem
    assert problem["type"].endswith("/" + code) and problem["title"] and problem["detail"]
    return problem


def refused_without_writes(app: InProcessApp, request: BadRequest) -> dict[str, Any]:
    before = app.snapshot()
    problem = assert_problem(request.send(app.http), request.status, request.code, request.field)
    app.settle()
    assert app.snapshot() == before, f"{request.name} wrote to the store"
    return problem


START_ERRORS = [
    BadRequest("invalid JSON", "POST", RUNS, 400, "malformed_json", "body", content=b'{"input": ', headers=JSON),
    BadRequest("JSON not an object", "POST", RUNS, 400, "malformed_json", "body", content=b'["hi"]', headers=JSON),
    BadRequest("empty body", "POST", RUNS, 400, "malformed_json", "body", content=b"", headers=JSON),
    BadRequest(
        "wrong content type",
        "POST",
        RUNS,
        415,
        "unsupported_media_type",
        "header.content-type",
        content=b"input=hi",
        headers={"content-type": "application/x-www-form-urlencoded"},
    ),
    BadRequest("unknown agent", "POST", "/api/agents/nobody/runs", 404, "agent_not_found", "path.agent", {"input": 1}),
    BadRequest("empty input", "POST", RUNS, 422, "validation_failed", "body.input", {"input": ""}),
    BadRequest("blank input", "POST", RUNS, 422, "validation_failed", "body.input", {"input": "   "}),
    BadRequest("no messages", "POST", RUNS, 422, "validation_failed", "body.input", {"input": []}),
    BadRequest("missing input", "POST", RUNS, 422, "validation_failed", "body.input", {}),
    BadRequest(
        "blank message", "POST", RUNS, 422, "validation_failed", "body.input.0.content", {"input": [{"content": " "}]}
    ),
    BadRequest(
        "wait too long", "POST", RUNS, 422, "validation_failed", "body.wait_seconds", {"input": "x", "wait_seconds": 61}
    ),
    BadRequest(
        "bad session", "POST", RUNS, 422, "validation_failed", "body.session_id", {"input": "x", "session_id": 1}
    ),
    BadRequest("unknown field", "POST", RUNS, 422, "validation_failed", "body.colour", {"input": "x", "colour": "red"}),
    BadRequest("unknown run", "GET", "/api/runs/no-such-run", 404, "run_not_found", "path.run_id"),
    BadRequest("cancel unknown run", "POST", "/api/runs/no-such-run/cancel", 404, "run_not_found", "path.run_id"),
    BadRequest("approvals of unknown run", "GET", "/api/runs/nope/approvals", 404, "run_not_found", "path.run_id"),
    BadRequest(
        "decide on unknown run",
        "POST",
        "/api/runs/nope/approvals/a1",
        404,
        "run_not_found",
        "path.run_id",
        {"decision": "approve"},
    ),
    BadRequest("unknown session", "GET", "/api/sessions/nope", 404, "session_not_found", "path.session_id"),
    # A single-valued query parameter sent twice reaches the handlers as Azure's Functions host passes it, "v1,v2" (as
    # `?limit=1,2` would): refused naming it, never read as one of the two.
    BadRequest("a limit sent twice", "GET", "/api/sessions?limit=1&limit=2", 422, "validation_failed", "query.limit"),
    BadRequest("a status sent twice", "GET", "/api/runs?status=running&status=failed", 422, "validation_failed",
               "query.status"),
]


# Ids that cannot exist (1-128 characters of A-Za-z0-9._:-, starting with a letter or digit): refused by the one
# check every route runs first (`http_api.path_ids`) with the route's own not-found code, never a store error.
_LONG = "r" * 129
_BAD_IDS = [("too long", _LONG), ("a space", "a%20b"), ("non-ASCII", "caf%C3%A9"), ("a leading dash", "-run"),
            ("a quote", "a%27b"), ("a hash", "a%23b"), ("a backslash", "a%5Cb")]
PATH_ID_ERRORS = [
    *(BadRequest(f"run id with {what}", "GET", f"/api/runs/{bad}", 404, "run_not_found", "path.run_id")
      for what, bad in _BAD_IDS),
    *(BadRequest(f"cancel id with {what}", "POST", f"/api/runs/{bad}/cancel", 404, "run_not_found", "path.run_id")
      for what, bad in _BAD_IDS[:2]),
    BadRequest("approvals of a bad run id", "GET", f"/api/runs/{_LONG}/approvals", 404, "run_not_found",
               "path.run_id"),
    BadRequest("a bad approval id", "POST", f"/api/runs/run-1/approvals/{_LONG}", 404, "approval_not_found",
               "path.approval_id", {"decision": "approve"}),
    BadRequest("a bad approval id (space)", "POST", "/api/runs/run-1/approvals/a%20b", 404, "approval_not_found",
               "path.approval_id", {"decision": "approve"}),
    *(BadRequest(f"session id with {what}", "GET", f"/api/sessions/{bad}", 404, "session_not_found",
                 "path.session_id") for what, bad in _BAD_IDS),
    BadRequest("delete a bad session id", "DELETE", f"/api/sessions/{_LONG}", 404, "session_not_found",
               "path.session_id"),
    BadRequest("messages of a bad session id", "GET", "/api/sessions/a%20b/messages", 404, "session_not_found",
               "path.session_id"),
    BadRequest("a bad agent name", "POST", "/api/agents/a%20b/runs", 404, "agent_not_found", "path.agent",
               {"input": "x"}),
    BadRequest("a bad workflow name", "GET", f"/api/workflows/{_LONG}", 404, "workflow_not_found", "path.name"),
    BadRequest("a bad workflow run id", "GET", f"/api/workflows/runs/{_LONG}", 404, "workflow_run_not_found",
               "path.run_id"),
    BadRequest("cancel a bad workflow run id", "POST", "/api/workflows/runs/a%20b/cancel", 404,
               "workflow_run_not_found", "path.run_id"),
    BadRequest("a bad signal name", "POST", "/api/workflows/runs/run-1/signals/a%20b", 404, "signal_not_found",
               "path.name", {"payload": 1}),
    BadRequest("a bad run id of a signal", "POST", f"/api/workflows/runs/{_LONG}/signals/go", 404,
               "workflow_run_not_found", "path.run_id", {"payload": 1}),
]


@pytest.mark.parametrize("request_", PATH_ID_ERRORS, ids=[r.name for r in PATH_ID_ERRORS])
def test_a_path_id_that_cannot_exist_is_404_naming_the_parameter(
    app: InProcessApp, model: ScriptedModelServer, request_: BadRequest
) -> None:
    model.set_script(Script.of("unused"))
    problem = refused_without_writes(app, request_)
    assert "Traceback" not in problem["detail"] and len(problem["detail"]) < 300


@pytest.mark.parametrize("request_", START_ERRORS, ids=[r.name for r in START_ERRORS])
def test_bad_request_is_refused_and_writes_nothing(
    app: InProcessApp, model: ScriptedModelServer, request_: BadRequest
) -> None:
    model.set_script(Script.of("unused"))
    refused_without_writes(app, request_)
    assert model.log.total == 0


def test_oversized_input_is_413_at_exactly_the_documented_limit(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of("Fine."))
    limit = app.max_body_bytes
    prefix, suffix = b'{"input": "', b'"}'
    at_limit = prefix + b"x" * (limit - len(prefix) - len(suffix)) + suffix
    over_limit = at_limit[:-2] + b'x"}'

    before = app.snapshot()
    problem = assert_problem(app.http.post(RUNS, content=over_limit, headers=JSON), 413, "payload_too_large", "body")
    assert problem["limit_bytes"] == limit
    assert app.snapshot() == before
    assert app.http.post(RUNS, content=at_limit, headers=JSON).status_code == 202


# ---------------------------------------------------------------------------------------------------- a live run


@pytest.fixture
def waiting(app: InProcessApp, model: ScriptedModelServer) -> dict[str, Any]:
    """A run waiting for approval of a transfer (amount 1..1000), 600 s approval timeout."""
    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 100}), "Done."))
    started = app.start(input="Pay GB1234", approval_timeout_seconds=600)
    app.settle()
    view = app.view(started["run_id"])
    assert view["status"] == "requires_action"
    return view


def poll_with(run_id: str, token: str, code: str) -> BadRequest:
    path = f"/api/runs/{run_id}?continuation_token={token}"
    return BadRequest(f"poll with {code}", "GET", path, 401, code, "query.continuation_token")


def test_bad_tokens_get_401_with_a_code(app: InProcessApp, waiting: dict[str, Any], model: ScriptedModelServer) -> None:
    run_id, token = waiting["run_id"], waiting["continuation_token"]
    middle = len(token) // 2
    tampered = token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]
    other_app = ContinuationTokens(["another-apps-secret"]).issue("run", run_id, {"seq": 0})
    expired = ContinuationTokens([TOKEN_SECRET], now=lambda: time.time() - 3 * 86400).issue("run", run_id, {"seq": 0})
    sessions_token = ContinuationTokens([TOKEN_SECRET]).issue("session-messages", waiting["session_id"], {"seq": 0})
    model.set_script(Script.of("Other run's answer."))
    other_token = app.start(input="hello")["continuation_token"]
    app.settle()

    for bad, code in [
        ("garbage", "token_invalid"),
        (tampered, "token_invalid"),
        (other_app, "token_invalid"),
        (expired, "token_expired"),
        (other_token, "token_foreign"),  # another run's token never shows this run (nor that one's data)
        (sessions_token, "token_foreign"),
    ]:
        problem = refused_without_writes(app, poll_with(run_id, bad, code))
        assert "updates" not in problem


def test_approval_errors(app: InProcessApp, waiting: dict[str, Any]) -> None:
    run_id = waiting["run_id"]
    [approval_id] = pending_ids(waiting)
    decide = f"/api/runs/{run_id}/approvals/{approval_id}"
    other_run = app.start(input="another session")["run_id"]
    app.settle()
    for request in [
        BadRequest(
            "unknown approval",
            "POST",
            f"/api/runs/{run_id}/approvals/nope",
            404,
            "approval_not_found",
            "path.approval_id",
            {"decision": "approve"},
        ),
        BadRequest(
            "edit fails the schema",
            "POST",
            decide,
            422,
            "invalid_arguments",
            "body.arguments",
            {"decision": "approve", "arguments": {"account": "GB1234", "amount": 5000}},
        ),
        BadRequest(
            "edit of a wrong type",
            "POST",
            decide,
            422,
            "invalid_arguments",
            "body.arguments",
            {"decision": "approve", "arguments": {"account": "nope", "amount": "lots"}},
        ),
        BadRequest(
            "edit with a rejection",
            "POST",
            decide,
            422,
            "validation_failed",
            "body.arguments",
            {"decision": "reject", "arguments": {"account": "GB1234", "amount": 1}},
        ),
        BadRequest("unknown decision", "POST", decide, 422, "validation_failed", "body.decision", {"decision": "?"}),
        BadRequest(
            "bad poll wait",
            "GET",
            f"/api/runs/{run_id}?wait_seconds=-1",
            422,
            "validation_failed",
            "query.wait_seconds",
        ),
        BadRequest(
            "busy session",
            "POST",
            RUNS,
            409,
            "session_busy",
            "body.session_id",
            {"input": "again", "session_id": waiting["session_id"]},
        ),
        BadRequest(
            "another agent's session",
            "POST",
            "/api/agents/strict/runs",
            409,
            "session_agent_mismatch",
            "body.session_id",
            {"input": "x", "session_id": waiting["session_id"]},
        ),
        BadRequest(
            "another run's approval",
            "POST",
            f"/api/runs/{other_run}/approvals/{approval_id}",
            404,
            "approval_not_found",
            "path.approval_id",
            {"decision": "approve"},
        ),
    ]:
        refused_without_writes(app, request)
    assert app.view(run_id)["status"] == "requires_action"  # the run never noticed


def test_another_decision_after_one_is_409_and_the_same_one_again_gets_its_answer(
    app: InProcessApp, waiting: dict[str, Any]
) -> None:
    """Once decided, the approval's other decision is 409 (nothing written). The same caller's same decision again
    is how a client asks once more after a lost answer: it gets that answer (202, the approval as decided), also
    once the run it let go on has finished, and nothing is written or run again."""
    run_id = waiting["run_id"]
    [approval_id] = pending_ids(waiting)
    first = app.decide(run_id, approval_id, "approve")
    assert first.status_code == 202
    app.settle()
    assert app.view(run_id)["status"] == "completed"
    path = f"/api/runs/{run_id}/approvals/{approval_id}"
    problem = refused_without_writes(
        app, BadRequest("again", "POST", path, 409, "approval_already_decided", None, {"decision": "reject"})
    )
    assert problem["current_status"] == "approved"
    before = app.snapshot()
    again = app.decide(run_id, approval_id, "approve")
    app.settle()
    assert (again.status_code, again.json()) == (202, first.json())
    assert again.json()["status"] == "approved" and app.snapshot() == before
    assert len(app.effects(waiting["session_id"], "transfer")) == 1
    # Several clients' retries of it at once (a page and agentctl of the same person): each gets that answer.
    together = post_concurrently(app.host.base_url, 4, path, {"decision": "approve"}, {})
    app.settle()
    assert [(r.status_code, r.json()) for r in together] == [(202, first.json())] * 4
    assert app.snapshot() == before and len(app.effects(waiting["session_id"], "transfer")) == 1


def test_approval_after_expiry_is_410(app: InProcessApp, waiting: dict[str, Any]) -> None:
    run_id = waiting["run_id"]
    [approval_id] = pending_ids(waiting)
    app.advance(601)
    assert app.view(run_id)["status"] == "completed"  # timed out: rejected, the model answered

    path = f"/api/runs/{run_id}/approvals/{approval_id}"
    late = BadRequest("late", "POST", path, 410, "approval_expired", None, {"decision": "approve"})
    refused_without_writes(app, late)
    assert app.effects(waiting["session_id"]) == []
