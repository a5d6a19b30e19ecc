"""Callers racing each other over HTTP: concurrent starts on one session (one wins, the rest get 409 with the
winner's id) and concurrent decisions on one approval (one wins, the rest get 409; the tool runs once)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
from e2e_harness import InProcessApp, pending_ids

from scripted_model import Reply, Script, ScriptedModelServer

RACERS = 6


def race(app: InProcessApp, method: str, path: str, bodies: list[dict]) -> list[httpx.Response]:
    def send(body: dict) -> httpx.Response:
        with httpx.Client(base_url=app.host.base_url, timeout=30, trust_env=False) as client:
            return client.request(method, path, json=body)

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(send, bodies))


def test_concurrent_starts_on_one_session(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script(default=Reply.call("send_email", {"to": "a@b.cd", "subject": "s", "body": "b"})))
    first = app.start(input="open the session")
    app.settle()  # waiting for approval: the session is busy
    app.cancel(first["run_id"])
    app.settle()

    bodies = [{"input": f"racer {i}", "session_id": first["session_id"]} for i in range(RACERS)]
    responses = race(app, "POST", "/api/agents/helper/runs", bodies)

    winners = [r for r in responses if r.status_code == 202]
    losers = [r for r in responses if r.status_code != 202]
    assert len(winners) == 1, [r.status_code for r in responses]
    assert {(r.status_code, r.json()["code"]) for r in losers} == {(409, "session_busy")}
    assert {r.json()["active_run_id"] for r in losers} == {winners[0].json()["run_id"]}
    app.settle()
    session = app.http.get(f"/api/sessions/{first['session_id']}").json()
    assert session["run_count"] == 2  # the losers left no run behind


def test_concurrent_decisions_on_one_approval(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 10}), "Done."))
    started = app.start(input="Pay")
    app.settle()
    [approval_id] = pending_ids(app.view(started["run_id"]))

    bodies = [{"decision": "approve" if i % 2 else "reject"} for i in range(RACERS)]
    # The run must not finish while the racers are answered: a retry of the stored decision is delivered again
    # (202) while the run waits, and refused (409) once it is over (test_e2e_bad_input). Its next model call
    # waits until every racer has its answer.
    model.hold_answers()
    try:
        responses = race(app, "POST", f"/api/runs/{started['run_id']}/approvals/{approval_id}", bodies)
    finally:
        model.release_answers()
    app.settle()

    winner = next(r.json() for r in responses if r.status_code == 202)
    # One caller (anonymous) sent both decisions: those equal to the stored one are its own retries (202, delivered
    # again, applied once); the others lost the race.
    same = {"approved": "approve", "rejected": "reject"}[winner["status"]]
    expected = [202 if body["decision"] == same else 409 for body in bodies]
    assert [r.status_code for r in responses] == expected
    assert {r.json()["code"] for r in responses if r.status_code == 409} == {"approval_already_decided"}
    assert [a["status"] for a in app.approvals(started["run_id"])] == [winner["status"]]
    assert app.view(started["run_id"])["status"] == "completed"
    expected_effects = 1 if winner["status"] == "approved" else 0
    assert len(app.effects(started["session_id"], "transfer")) == expected_effects
