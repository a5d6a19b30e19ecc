"""Approvers: a tool's (or a workflow gate's) approval names who may decide it; others get 403 (if they can see the
approval) or 404; separation of duties keeps the requester out; the inbox lists exactly what the caller may decide."""

from __future__ import annotations

import pytest
from auth_agents.payer import FIRST_DEADLINE_SECONDS, SUPERVISOR_ROLE
from auth_people import ALICE, BOB, CAROL, DAVE, Callers, Person

from scripted_model import Reply, Script
from scripted_model.script import Match, Rule


def pay_script() -> Script:
    return Script(
        rules=[
            Rule(match=Match(last_user="pay", after_tool_results=False),
                 reply=Reply.call("pay", {"to": "bob@example.com", "amount": 42})),
            Rule(match=Match(last_user="note", after_tool_results=False), reply=Reply.call("note", {"text": "x"})),
            Rule(match=Match(after_tool_results=True), reply=Reply(text="Done.")),
        ],
        default=Reply(text="Hi."),
    )


def waiting_run(app, callers: Callers, person, prompt: str, agent: str = "payer") -> tuple[str, str]:
    response = app.http.post(f"/api/agents/{agent}/runs", json={"input": prompt}, headers=callers.headers(person))
    assert response.status_code == 202, response.text
    app.settle()
    view = app.http.get(f"/api/runs/{response.json()['run_id']}", headers=callers.headers(person)).json()
    assert view["status"] == "requires_action", view
    return view["run_id"], view["pending_approvals"][0]["approval_id"]


def waiting_workflow(app, callers: Callers, person) -> str:
    """A `publish_flow` run of `person`'s, waiting at its gate (decided by a publisher)."""
    started = app.http.post("/api/workflows/publish_flow/runs", json={"input": {"title": "T"}},
                            headers=callers.headers(person))
    assert started.status_code == 202, started.text
    app.settle()
    return started.json()["run_id"]


def decide(app, callers: Callers, person, run_id: str, approval_id: str, decision: str = "approve",
           arguments: dict | None = None):
    body = {"decision": decision, **({"arguments": arguments} if arguments is not None else {})}
    return app.http.post(f"/api/runs/{run_id}/approvals/{approval_id}", json=body, headers=callers.headers(person))


def inbox(app, callers: Callers, person, status: str = "pending") -> list[dict]:
    response = app.http.get("/api/approvals", params={"status": status}, headers=callers.headers(person))
    assert response.status_code == 200, response.text
    return response.json()["approvals"]


@pytest.mark.parametrize("mode", ["easyauth", "jwt"])
def test_a_role_approver_decides_others_get_403_or_404(app_in, model, mode: str) -> None:
    model.set_script(pay_script())
    with app_in(mode) as (app, callers):
        tools = app.http.get("/api/agents/payer", headers=callers.headers(ALICE)).json()["tools"]
        policies = {t["name"]: (t["approvers"], t["separation_of_duties"]) for t in tools}
        assert policies == {"pay": (["role:Payments.Approver"], True), "note": (["owner"], False)}
        run_id, approval_id = waiting_run(app, callers, ALICE, "pay bob")
        # The inbox: Carol and Dave hold the role; Alice (the requester: separation of duties) and Bob do not.
        [carols] = inbox(app, callers, CAROL)
        assert (carols["approval_id"], carols["run_id"], carols["agent"], carols["kind"]) == (
            approval_id, run_id, "payer", "agent")
        assert carols["approvers"] == ["role:Payments.Approver"] and carols["separation_of_duties"] is True
        assert [a["approval_id"] for a in inbox(app, callers, DAVE)] == [approval_id]
        assert inbox(app, callers, ALICE) == [] and inbox(app, callers, BOB) == []
        # Carol sees the run's approvals she may decide, not the run itself.
        listed = app.http.get(f"/api/runs/{run_id}/approvals", headers=callers.headers(CAROL))
        assert [a["approval_id"] for a in listed.json()["approvals"]] == [approval_id]
        assert app.http.get(f"/api/runs/{run_id}", headers=callers.headers(CAROL)).status_code == 404
        assert app.http.get(f"/api/runs/{run_id}/approvals", headers=callers.headers(BOB)).status_code == 404

        def listed(status: str) -> list[str]:
            page = app.http.get("/api/runs", params={"status": status}, headers=callers.headers(ALICE)).json()
            return [r["run_id"] for r in page["runs"]]

        assert (listed("requires_action"), listed("in_progress"), listed("completed")) == ([run_id], [], [])

        own = decide(app, callers, ALICE, run_id, approval_id)  # she sees it (her run) but may not decide it
        assert own.status_code == 403 and own.json()["code"] == "not_an_approver", own.text
        stranger = decide(app, callers, BOB, run_id, approval_id)
        assert stranger.status_code == 404 and stranger.json()["code"] == "run_not_found"

        approved = decide(app, callers, CAROL, run_id, approval_id)
        assert approved.status_code == 202, approved.text
        assert (approved.json()["decided_by"], approved.json()["decided_by_name"]) == (CAROL.id, "Carol")
        app.settle()
        view = app.http.get(f"/api/runs/{run_id}", headers=callers.headers(ALICE)).json()
        assert (view["status"], view["output"]["text"]) == ("completed", "Done.")
        assert (listed("requires_action"), listed("completed")) == ([], [run_id])
        [record] = app.http.get(f"/api/runs/{run_id}/approvals", headers=callers.headers(ALICE)).json()["approvals"]
        assert (record["status"], record["decided_by"]) == ("approved", CAROL.id)

        # Too late for Dave: 409, without telling him who decided; the owner is told.
        late = decide(app, callers, DAVE, run_id, approval_id)
        assert late.status_code == 409 and late.json()["code"] == "approval_already_decided"
        assert CAROL.id not in late.text and "Carol" not in late.text
        assert inbox(app, callers, DAVE) == [] and [a["approval_id"] for a in inbox(app, callers, CAROL, "approved")]


@pytest.mark.parametrize("mode", ["easyauth", "jwt"])
def test_separation_of_duties_and_owner_approvals(app_in, model, mode: str) -> None:
    model.set_script(pay_script())
    with app_in(mode) as (app, callers):
        # Carol holds the role but asked for the payment herself: she may not approve it; Dave may.
        run_id, approval_id = waiting_run(app, callers, CAROL, "pay bob")
        assert inbox(app, callers, CAROL) == []
        refused = decide(app, callers, CAROL, run_id, approval_id)
        assert refused.status_code == 403 and refused.json()["code"] == "not_an_approver"
        assert decide(app, callers, DAVE, run_id, approval_id, "reject").status_code == 202

        # An approver may not re-address the payment she approves (she would make and approve it alone): 403, and
        # nothing is decided; the call as asked for, or the same arguments again, she approves.
        run_id, approval_id = waiting_run(app, callers, ALICE, "pay bob")
        edited = decide(app, callers, DAVE, run_id, approval_id, arguments={"to": "dave@example.com", "amount": 42})
        assert edited.status_code == 403 and edited.json()["code"] == "edit_not_allowed", edited.text
        [record] = app.http.get(f"/api/runs/{run_id}/approvals", headers=callers.headers(ALICE)).json()["approvals"]
        assert (record["status"], record["edited_arguments"]) == ("pending", None)
        same = decide(app, callers, DAVE, run_id, approval_id, arguments={"to": "bob@example.com", "amount": 42})
        assert same.status_code == 202, same.text
        app.settle()
        session_id = app.http.get(f"/api/runs/{run_id}", headers=callers.headers(ALICE)).json()["session_id"]
        paid = app.store_call(lambda store: store.list_effects(session_id, kind="payment"))
        assert [e.payload for e in paid] == [{"to": "bob@example.com", "amount": 42}]

        # `note` keeps the default approvers (["owner"]): Alice decides her own; a role holder may not even see it.
        note_run, note_approval = waiting_run(app, callers, ALICE, "note it")
        assert [a["approval_id"] for a in inbox(app, callers, ALICE)] == [note_approval]
        assert inbox(app, callers, DAVE) == []
        assert decide(app, callers, DAVE, note_run, note_approval).status_code == 404
        assert decide(app, callers, ALICE, note_run, note_approval).status_code == 202


SUPERVISOR = Person("oid-sam", "Sam", (SUPERVISOR_ROLE,))


@pytest.mark.parametrize("mode", ["easyauth", "jwt"])
def test_an_escalated_approval_is_decided_by_whom_it_was_escalated_to(app_in, model, mode: str) -> None:
    """`Escalate(to="role:Supervisors")`: at the first deadline the payment goes to the supervisors, who find it in
    their inbox and decide it; separation of duties still keeps the requester out, and strangers still get 404."""
    model.set_script(pay_script())
    with app_in(mode) as (app, callers):
        run_id, approval_id = waiting_run(app, callers, ALICE, "pay bob", agent="escalating_payer")
        assert inbox(app, callers, SUPERVISOR) == []
        assert decide(app, callers, SUPERVISOR, run_id, approval_id).status_code == 404  # not theirs yet
        app.advance(FIRST_DEADLINE_SECONDS + 1)
        app.settle()
        [pending] = app.http.get(f"/api/runs/{run_id}", headers=callers.headers(ALICE)).json()["pending_approvals"]
        assert pending["escalated_to"] == f"role:{SUPERVISOR_ROLE}"

        [listed] = inbox(app, callers, SUPERVISOR)
        assert listed["approval_id"] == approval_id
        assert listed["approvers"] == ["role:Payments.Approver", f"role:{SUPERVISOR_ROLE}"]
        assert decide(app, callers, ALICE, run_id, approval_id).status_code == 403  # separation of duties
        assert decide(app, callers, BOB, run_id, approval_id).status_code == 404
        approved = decide(app, callers, SUPERVISOR, run_id, approval_id)
        assert approved.status_code == 202, approved.text
        app.settle()
        view = app.http.get(f"/api/runs/{run_id}", headers=callers.headers(ALICE)).json()
        assert (view["status"], view["output"]["text"]) == ("completed", "Done.")
        [record] = app.http.get(f"/api/runs/{run_id}/approvals", headers=callers.headers(ALICE)).json()["approvals"]
        assert (record["status"], record["decided_by"]) == ("approved", SUPERVISOR.id)


@pytest.mark.parametrize("mode", ["easyauth", "jwt"])
def test_a_workflow_gate_is_decided_by_its_approver_role(app_in, model, mode: str) -> None:
    with app_in(mode) as (app, callers):
        run_id = waiting_workflow(app, callers, ALICE)
        [gate] = inbox(app, callers, DAVE)
        assert (gate["run_id"], gate["agent"], gate["kind"]) == (run_id, "publish_flow", "workflow")
        assert inbox(app, callers, ALICE) == [] and inbox(app, callers, CAROL) == []
        assert decide(app, callers, ALICE, run_id, gate["approval_id"]).status_code == 403
        assert decide(app, callers, CAROL, run_id, gate["approval_id"]).status_code == 404
        assert decide(app, callers, DAVE, run_id, gate["approval_id"]).status_code == 202
        app.settle()
        runs = app.http.get("/api/runs", headers=callers.headers(ALICE)).json()["runs"]
        assert [(r["run_id"], r["kind"], r["status"]) for r in runs] == [(run_id, "workflow", "completed")]
        done = app.http.get(f"/api/workflows/runs/{run_id}", headers=callers.headers(ALICE)).json()
        assert done["status"] == "completed" and done["output"] == {"approved": True, "decided_by": DAVE.id}


def test_the_inbox_pages_newest_first(app_in, model) -> None:
    model.set_script(pay_script())
    with app_in("easyauth") as (app, callers):
        expected = []
        for _ in range(5):
            expected.append(waiting_run(app, callers, ALICE, "pay bob")[1])
            app.advance(1)
        seen, token = [], None
        while True:
            params = {"limit": 2, **({"continuation_token": token} if token else {})}
            page = app.http.get("/api/approvals", params=params, headers=callers.headers(CAROL)).json()
            seen += [a["approval_id"] for a in page["approvals"]]
            token = page["continuation_token"]
            if token is None:
                break
        assert seen == list(reversed(expected))
