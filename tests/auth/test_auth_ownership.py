"""Ownership: sessions, agent runs and workflow runs belong to the principal that created them; every route tried
by another principal answers 404 (existence is not revealed) and changes nothing."""

from __future__ import annotations

import re

import pytest
from auth_people import ALICE, BOB, Callers

from scripted_model import Reply, Script
from scripted_model.script import Match, Rule

OWNED = {"run_id", "session_id", "approval_id"}


def note_script() -> Script:
    """'note ...' makes the model call the owner-approved `note` tool; after the tool result it answers."""
    return Script(
        rules=[
            Rule(match=Match(last_user="note", after_tool_results=False), reply=Reply.call("note", {"text": "hi"})),
            Rule(match=Match(after_tool_results=True), reply=Reply(text="Noted.")),
        ],
        default=Reply(text="Hi."),
    )


def alices_things(app, callers: Callers) -> dict[str, str]:
    """Alice's session with a run waiting for her approval, and her workflow run waiting at its gate."""
    alice = callers.headers(ALICE)
    started = app.http.post("/api/agents/payer/runs", json={"input": "note this", "session_id": "s-alice"},
                            headers=alice)
    assert started.status_code == 202, started.text
    app.settle()
    view = app.http.get(f"/api/runs/{started.json()['run_id']}", headers=alice).json()
    assert view["status"] == "requires_action", view
    workflow = app.http.post("/api/workflows/publish_flow/runs", json={"input": {}}, headers=alice)
    assert workflow.status_code == 202, workflow.text
    app.settle()
    gate = app.http.get(f"/api/workflows/runs/{workflow.json()['run_id']}", headers=alice).json()
    assert gate["status"] == "requires_action", gate
    return {
        "run_id": view["run_id"],
        "session_id": view["session_id"],
        "approval_id": view["pending_approvals"][0]["approval_id"],
        "workflow_run_id": gate["run_id"],
        "gate_approval_id": gate["pending_approvals"][0]["approval_id"],
    }


def owned_requests(app, ids: dict[str, str]) -> list[tuple[str, str, dict | None]]:
    """Every route of the served OpenAPI document that names one of Alice's things, filled with her ids (a route
    added later - e.g. a stream of a run - is covered as soon as it is in the document)."""
    document = app.http.get("/api/openapi.json").json()
    requests: list[tuple[str, str, dict | None]] = []
    for path, operations in document["paths"].items():
        params = set(re.findall(r"{(\w+)}", path))
        for method in operations:
            if path == "/api/agents/{agent}/runs":  # start a run in Alice's session
                requests.append((method, "/api/agents/payer/runs", {"input": "hi", "session_id": ids["session_id"]}))
                continue
            if not params & OWNED:
                continue
            if path.startswith("/api/ui/"):
                # The decision page is public at the front and gated by its signed link: 403 for any id without one,
                # whoever asks and whether the approval exists (tests/e2e/test_e2e_decision_page.py); its data route,
                # .../approvals/{id}/context, is an owned route like the others.
                continue
            body = {"decision": "approve"} if "approval_id" in params else {"payload": {}}
            agent_ids = {"run_id": ids["run_id"], "approval_id": ids["approval_id"]}
            workflow_ids = {"run_id": ids["workflow_run_id"], "approval_id": ids["gate_approval_id"]}
            if path.startswith("/api/workflows/"):
                variants = [workflow_ids]
            else:  # the run routes serve both (a workflow's gates are decided there too)
                variants = [agent_ids, workflow_ids] if "run_id" in params else [agent_ids]
            for values in variants:
                url = path
                for name, value in {**values, "session_id": ids["session_id"], "name": "go"}.items():
                    url = url.replace("{" + name + "}", value)
                requests.append((method, url, body if method in ("post", "put", "patch") else None))
    return requests


@pytest.mark.parametrize(
    ("mode", "store"),
    [("easyauth", "sqlite"), ("jwt", "sqlite"), pytest.param("easyauth", "cosmos", marks=pytest.mark.cosmos)],
)
def test_every_route_of_another_principal_answers_404_and_changes_nothing(app_in, model, mode: str, store) -> None:
    model.set_script(note_script())
    with app_in(mode, store) as (app, callers):
        ids = alices_things(app, callers)
        before = app.snapshot()
        bob = callers.headers(BOB)
        tried = owned_requests(app, ids)
        assert len(tried) >= 12, tried
        for method, url, body in tried:
            response = app.http.request(method.upper(), url, json=body, headers=bob)
            assert response.status_code == 404, (method, url, response.status_code, response.text)
            assert ALICE.id not in response.text and ALICE.name not in response.text
        app.settle()
        assert app.snapshot() == before  # nothing Bob sent changed anything (no session created, nothing decided)

        # Bob's lists are empty; Alice's hold her things.
        for path, key in (("/api/runs", "runs"), ("/api/sessions", "sessions"), ("/api/approvals", "approvals")):
            assert app.http.get(path, headers=bob).json()[key] == [], path
        alice = callers.headers(ALICE)
        runs = app.http.get("/api/runs", headers=alice).json()["runs"]
        assert {r["run_id"] for r in runs} == {ids["run_id"], ids["workflow_run_id"]}
        sessions = app.http.get("/api/sessions", headers=alice).json()["sessions"]
        assert [s["session_id"] for s in sessions] == [ids["session_id"]]  # workflow bookkeeping is not listed
        inbox = app.http.get("/api/approvals", headers=alice).json()["approvals"]
        assert {a["approval_id"] for a in inbox} == {ids["approval_id"], ids["gate_approval_id"]} - {
            ids["gate_approval_id"]  # the gate is for publishers, not for its owner
        }

        # Alice's reads all work.
        for method, url, _ in tried:
            if method == "get":
                response = app.http.get(url, headers=alice)
                workflow_as_run = f"/api/runs/{ids['workflow_run_id']}"
                if url in (workflow_as_run, f"{workflow_as_run}/stream", f"{workflow_as_run}/transcript"):
                    assert response.json()["code"] == "run_is_a_workflow"
                    continue
                assert response.status_code in (200, 202), (url, response.text)


@pytest.mark.parametrize("store", ["sqlite", pytest.param("cosmos", marks=pytest.mark.cosmos)])
def test_the_workflow_routes_find_only_workflow_runs_even_of_their_owner(app_in, model, store) -> None:
    """The workflow routes read a workflow's run in its control session (`wf-<run id>`), not through the run lookup:
    the owner's agent run, a workflow run id with the control session's prefix, or with a different case, is no
    workflow run on either store (404 on path.run_id), and nothing is cancelled, signalled or shown."""
    model.set_script(note_script())
    with app_in("easyauth", store) as (app, callers):
        ids = alices_things(app, callers)
        alice = callers.headers(ALICE)
        before = app.snapshot()
        workflow = ids["workflow_run_id"]
        methods = app.http.get("/api/openapi.json").json()["paths"]
        paths = [path for path in methods if path.startswith("/api/workflows/runs/")]
        assert len(paths) >= 3, paths
        for run_id in (ids["run_id"], f"wf-{workflow}", workflow.upper()):
            for path in paths:
                url = path.replace("{run_id}", run_id).replace("{name}", "go")
                for method in methods[path]:
                    body = {"payload": {}} if method == "post" else None
                    response = app.http.request(method.upper(), url, json=body, headers=alice)
                    assert response.status_code == 404, (method, url, response.text)
                    problem = response.json()
                    assert problem["code"] in ("workflow_run_not_found", "run_not_found"), (method, url, problem)
                    assert problem["field"] == "path.run_id", (method, url, problem)
        app.settle()
        assert app.snapshot() == before
        assert app.http.get(f"/api/runs/{ids['run_id']}", headers=alice).json()["status"] == "requires_action"


@pytest.mark.parametrize("mode", ["easyauth", "jwt"])
def test_list_tokens_are_bound_to_their_principal(app_in, model, mode: str) -> None:
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in(mode) as (app, callers):
        alice, bob = callers.headers(ALICE), callers.headers(BOB)
        for index in range(3):
            app.http.post("/api/agents/payer/runs", json={"input": "hi", "session_id": f"s{index}"}, headers=alice)
        app.settle()
        seen, token = [], None
        while True:
            params = {"limit": 2, **({"continuation_token": token} if token else {})}
            page = app.http.get("/api/sessions", params=params, headers=alice).json()
            seen += [s["session_id"] for s in page["sessions"]]
            token = page["continuation_token"]
            if token is None:
                break
            stolen = app.http.get("/api/sessions", params={"continuation_token": token}, headers=bob)
            assert stolen.status_code == 401, stolen.text
            other_list = app.http.get("/api/runs", params={"continuation_token": token}, headers=alice)
            assert other_list.status_code == 401, other_list.text
        assert seen == ["s2", "s1", "s0"]
        # A session id Alice uses is not Bob's to start runs in (404) and does not become his.
        taken = app.http.post("/api/agents/payer/runs", json={"input": "hi", "session_id": "s0"}, headers=bob)
        assert taken.status_code == 404 and taken.json()["code"] == "session_not_found"


def test_none_mode_has_one_principal_so_headers_separate_nobody(app_in, model) -> None:
    model.set_script(note_script())
    with app_in("none") as (app, callers):
        ids = alices_things(app, callers)
        bob = callers.headers(BOB)  # ignored: Bob is the same anonymous principal
        assert app.http.get(f"/api/runs/{ids['run_id']}", headers=bob).status_code == 202
        assert [s["session_id"] for s in app.http.get("/api/sessions", headers=bob).json()["sessions"]] == [
            ids["session_id"]
        ]
        # The single principal is trusted as every approver (the function key is the only gate), gates included.
        inbox = {a["approval_id"] for a in app.http.get("/api/approvals", headers=bob).json()["approvals"]}
        assert inbox == {ids["approval_id"], ids["gate_approval_id"]}
        decided = app.http.post(f"/api/runs/{ids['run_id']}/approvals/{ids['approval_id']}",
                                json={"decision": "approve"}, headers=bob)
        assert decided.status_code == 202 and decided.json()["decided_by"] == "anonymous"
