"""Slack's buttons decide as the mapped approver, under the same rules as the API, whatever the spelling of
`AUTH_MODE` (read case-insensitively everywhere): the run's owner, mapped in Slack, is still kept out by separation
of duties, and someone without the role still decides nothing.

Requests are signed as Slack signs them (`v0=` HMAC-SHA256 over `v0:{timestamp}:{body}`, computed here by hand)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from urllib.parse import urlencode

import pytest
from auth_people import ALICE, BOB, CAROL
from test_auth_approvers import pay_script, waiting_run

SIGNING_SECRET = "auth-tests-slack-signing-secret"
ROUTE = "/api/integrations/slack/interactions"
# Alice (who starts the payment), Bob (no role) and Carol (a payments approver), as SLACK_APPROVERS maps them.
SLACK_USERS = {"UALICE": ALICE, "UBOB": BOB, "UCAROL": CAROL}


def slack_settings() -> dict[str, str]:
    mapped = ",".join(f"{user}={person.id}/{' '.join(person.roles)}" for user, person in SLACK_USERS.items())
    return {"SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_APPROVERS": mapped}


def click(app, slack_user: str, run_id: str, approval_id: str) -> dict:
    """`slack_user` presses Approve on the approval's message (the block and value the app's message carries)."""
    payload = {"type": "block_actions", "user": {"id": slack_user, "username": slack_user},
               "actions": [{"action_id": "approve", "block_id": f"approval:{run_id}", "value": approval_id}]}
    body = urlencode({"payload": json.dumps(payload)})
    timestamp = str(int(time.time()))
    signature = "v0=" + hmac.new(SIGNING_SECRET.encode(), f"v0:{timestamp}:{body}".encode(), hashlib.sha256).hexdigest()
    response = app.http.post(ROUTE, content=body, headers={
        "content-type": "application/x-www-form-urlencoded", "x-slack-request-timestamp": timestamp,
        "x-slack-signature": signature})
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize(("mode", "spelled"), [("easyauth", "easyauth"), ("easyauth", "EasyAuth"), ("jwt", "JWT")])
def test_slack_deciders_follow_the_approvers_rule_however_auth_mode_is_spelled(app_in, model, mode, spelled) -> None:
    model.set_script(pay_script())
    with app_in(mode, AUTH_MODE=spelled, **slack_settings()) as (app, callers):
        assert app.http.get("/api/health").json()["auth"]["mode"] == mode
        run_id, approval_id = waiting_run(app, callers, ALICE, "pay bob")
        # The requester (separation of duties) and someone without the role decide nothing, in Slack as in the API.
        assert click(app, "UALICE", run_id, approval_id) == {"ok": False, "code": "not_an_approver"}
        assert click(app, "UBOB", run_id, approval_id) == {"ok": False, "code": "run_not_found"}
        [record] = app.http.get(f"/api/runs/{run_id}/approvals", headers=callers.headers(ALICE)).json()["approvals"]
        assert record["status"] == "pending"
        # A payments approver does.
        assert click(app, "UCAROL", run_id, approval_id) == {"ok": True, "status": "approved"}
        [record] = app.http.get(f"/api/runs/{run_id}/approvals", headers=callers.headers(ALICE)).json()["approvals"]
        assert (record["status"], record["decided_by"]) == ("approved", CAROL.id)
