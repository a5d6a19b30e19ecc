"""Sessions and agents over HTTP: a session's runs and messages (paged by continuation token), deleting a session
with everything in it, listing approvals by status, and what the app says about its agents."""

from __future__ import annotations

from e2e_harness import PROBLEM_JSON, InProcessApp, parallel_calls

from scripted_model import Reply, Script, ScriptedModelServer

EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello"}


def test_session_messages_page_by_token(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(*(Reply.call("lookup", {"key": f"k{i}"}) for i in range(3)), "Done."))
    started = app.start(input="Look up three keys", metadata={"ticket": "T-1"})
    app.settle()
    path = f"/api/sessions/{started['session_id']}/messages"

    pages, token = [], None
    while True:
        body = app.http.get(path, params={"limit": 3, **({"continuation_token": token} if token else {})}).json()
        pages.append(body["messages"])
        token = body["continuation_token"]
        if token is None:
            break
    everything = app.http.get(path, params={"limit": 200}).json()["messages"]

    assert [len(page) for page in pages] == [3, 3, 2]
    assert [m["seq"] for page in pages for m in page] == [m["seq"] for m in everything]
    assert len(everything) == 8 and all(m["run_id"] == started["run_id"] for m in everything)
    session = app.http.get(f"/api/sessions/{started['session_id']}").json()
    assert (session["agent"], session["message_count"], session["run_count"]) == ("helper", 8, 1)
    assert [r["status"] for r in session["runs"]] == ["completed"]
    foreign = app.http.get(path, params={"continuation_token": started["continuation_token"]})  # a run's token
    assert (foreign.status_code, foreign.json()["code"]) == (401, "token_foreign")


def test_delete_session_removes_everything_once_idle(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Sent."))
    started = app.start(input="Email Bob")
    app.settle()
    session_path = f"/api/sessions/{started['session_id']}"

    busy = app.http.delete(session_path)  # the run is waiting for approval: still active
    assert busy.status_code == 409 and busy.headers["content-type"].startswith(PROBLEM_JSON)
    assert (busy.json()["code"], busy.json()["active_run_id"]) == ("session_busy", started["run_id"])

    approval_id = app.view(started["run_id"])["pending_approvals"][0]["approval_id"]
    app.decide(started["run_id"], approval_id, "approve")
    app.settle()
    assert app.http.delete(session_path).status_code == 204

    assert app.http.get(session_path).status_code == 404
    assert app.http.get(f"{session_path}/messages").status_code == 404
    assert app.http.get(f"/api/runs/{started['run_id']}").status_code == 404
    assert app.effects(started["session_id"]) == []
    assert started["session_id"] not in app.snapshot().sessions


def test_list_approvals_by_status(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(parallel_calls("send_email", EMAIL, EMAIL), "One sent."))
    started = app.start_until_approval(input="Email Bob twice")
    first, second = started["pending_approvals"]
    app.decide(started["run_id"], first["approval_id"], "reject")
    app.settle()

    def listed(status: str) -> list[str]:
        response = app.http.get(f"/api/runs/{started['run_id']}/approvals", params={"status": status})
        return [a["approval_id"] for a in response.json()["approvals"]]

    assert listed("pending") == [second["approval_id"]]
    assert listed("rejected") == [first["approval_id"]]
    assert listed("approved") == []
    bad = app.http.get(f"/api/runs/{started['run_id']}/approvals", params={"status": "maybe"})
    assert (bad.status_code, bad.json()["field"]) == (422, "query.status")


def test_agents_and_health(app: InProcessApp, model: ScriptedModelServer) -> None:
    agents = {a["name"]: a for a in app.http.get("/api/agents").json()["agents"]}
    assert set(agents) == {"helper", "strict", "escalating", "frugal"}
    tools = {t["name"]: t for t in agents["helper"]["tools"]}
    assert tools["send_email"]["approval"] == "always" and tools["lookup"]["approval"] == "never"
    assert tools["transfer"]["parameters"]["properties"]["amount"]["maximum"] == 1000
    assert agents["strict"]["on_approval_timeout"] == "fail"
    assert app.http.get("/api/agents/strict").json()["approval_timeout_seconds"] == 600
    escalating = agents["escalating"]
    assert (escalating["on_approval_timeout"], escalating["escalation"]) == (
        "fail", {"to": "role:Supervisors", "timeout_seconds": 3600.0, "then": "fail"},
    )
    missing = app.http.get("/api/agents/nobody")
    assert (missing.status_code, missing.json()["code"]) == (404, "agent_not_found")
    health = app.http.get("/api/health").json()
    assert health["status"] == "ok" and health["store"] == app.store_backend and health["model_provider"] == "scripted"
