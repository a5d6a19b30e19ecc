"""Every approval the API shows says what its caller may do with it: `decidable` (approve or reject it now) and
`editable` (approve it with other arguments). They come from the decide route's own checks, so where a view says
false the route refuses, and where it says true the route accepts: a tool call its owner decides is editable; a
call under separation of duties is decidable by another approver, not by its requester, and editable by nobody; a
workflow's gate is decidable by its approver and never editable."""

from __future__ import annotations

import pytest
from auth_people import ALICE, CAROL, DAVE, Callers
from test_auth_approvers import decide, inbox, pay_script, waiting_run, waiting_workflow


def rights(approval: dict) -> tuple[bool, bool]:
    return approval["decidable"], approval["editable"]


def run_view_approval(app, callers: Callers, person, run_id: str, *, workflow: bool = False) -> dict:
    path = f"/api/workflows/runs/{run_id}" if workflow else f"/api/runs/{run_id}"
    [pending] = app.http.get(path, headers=callers.headers(person)).json()["pending_approvals"]
    return pending


def listed_approval(app, callers: Callers, person, run_id: str) -> dict:
    response = app.http.get(f"/api/runs/{run_id}/approvals", headers=callers.headers(person))
    assert response.status_code == 200, response.text
    [approval] = response.json()["approvals"]
    return approval


@pytest.mark.parametrize("mode", ["easyauth", "jwt"])
def test_a_tool_call_its_owner_decides_is_editable_and_the_route_accepts_an_edit(app_in, model, mode: str) -> None:
    model.set_script(pay_script())
    with app_in(mode) as (app, callers):
        run_id, approval_id = waiting_run(app, callers, ALICE, "note it")  # `note`: the owner decides
        assert rights(run_view_approval(app, callers, ALICE, run_id)) == (True, True)
        assert rights(listed_approval(app, callers, ALICE, run_id)) == (True, True)
        [mine] = inbox(app, callers, ALICE)
        assert rights(mine) == (True, True)

        edited = decide(app, callers, ALICE, run_id, approval_id, arguments={"text": "edited"})
        assert edited.status_code == 202, edited.text
        assert edited.json()["edited_arguments"] == {"text": "edited"}
        assert rights(edited.json()) == (False, False)  # decided: nothing left to do with it
        assert rights(listed_approval(app, callers, ALICE, run_id)) == (False, False)


@pytest.mark.parametrize("mode", ["easyauth", "jwt"])
def test_separation_of_duties_the_requester_may_not_decide_an_approver_may_not_edit(app_in, model, mode: str) -> None:
    model.set_script(pay_script())
    with app_in(mode) as (app, callers):
        run_id, approval_id = waiting_run(app, callers, ALICE, "pay bob")  # `pay`: a payments approver, not Alice
        # Alice, the requester, sees her run's approval and is told she can do nothing with it; the route agrees.
        assert rights(run_view_approval(app, callers, ALICE, run_id)) == (False, False)
        assert rights(listed_approval(app, callers, ALICE, run_id)) == (False, False)
        own = decide(app, callers, ALICE, run_id, approval_id)
        assert own.status_code == 403 and own.json()["code"] == "not_an_approver", own.text

        # Carol, an approver, may decide it but not change it: the edit is refused, the call as asked for accepted.
        [carols] = inbox(app, callers, CAROL)
        assert rights(carols) == (True, False)
        assert rights(listed_approval(app, callers, CAROL, run_id)) == (True, False)
        edited = decide(app, callers, CAROL, run_id, approval_id, arguments={"to": "carol@example.com", "amount": 42})
        assert edited.status_code == 403 and edited.json()["code"] == "edit_not_allowed", edited.text
        approved = decide(app, callers, CAROL, run_id, approval_id)
        assert approved.status_code == 202, approved.text


@pytest.mark.parametrize("mode", ["easyauth", "jwt"])
def test_a_workflow_gate_is_decidable_by_its_approver_and_never_editable(app_in, model, mode: str) -> None:
    with app_in(mode) as (app, callers):
        run_id = waiting_workflow(app, callers, ALICE)
        # The owner (not the gate's approver) in the workflow run's view: nothing to do but wait.
        assert rights(run_view_approval(app, callers, ALICE, run_id, workflow=True)) == (False, False)
        [gate] = inbox(app, callers, DAVE)
        assert rights(gate) == (True, False)
        assert rights(listed_approval(app, callers, DAVE, run_id)) == (True, False)

        edited = decide(app, callers, DAVE, run_id, gate["approval_id"],
                        arguments={**gate["arguments"], "message": "Publish something else?"})
        assert edited.status_code == 422 and edited.json()["code"] == "arguments_not_editable", edited.text
        assert decide(app, callers, DAVE, run_id, gate["approval_id"]).status_code == 202
