"""A workflow's approval gate is a yes/no sign-off: approving it "with edited arguments" is refused with a 4xx that
says so (422 `arguments_not_editable`, field `body.arguments`), not a 404 for an agent named after the workflow,
and its views say so before (`editable: false`); the gate's own arguments sent back unchanged are no edit, and the
gate is then decided as usual."""

from __future__ import annotations

import pytest
from workflow_helpers import settle, start, view
from workflow_scripts import REVIEW_APPROVE, standard_script


@pytest.mark.parametrize("store", ["sqlite", pytest.param("cosmos", marks=pytest.mark.cosmos)])
def test_a_gate_refuses_edited_arguments_and_is_still_decidable(request, model, store: str) -> None:
    host = request.getfixturevalue("host" if store == "sqlite" else "cosmos_host")
    model.set_script(standard_script(review=REVIEW_APPROVE))
    run_id = start(host, "review_pipeline", {"topic": "durable agents"})["run_id"]
    settle(host)
    [gate] = view(host, run_id)["pending_approvals"]
    assert (gate["decidable"], gate["editable"]) == (True, False)  # what the route below does
    url = f"/api/runs/{run_id}/approvals/{gate['approval_id']}"

    edited = {**gate["arguments"], "message": "Publish something else?"}
    refused = host.client.post(url, json={"decision": "approve", "arguments": edited})
    assert refused.status_code == 422, refused.text
    assert refused.headers["content-type"].startswith("application/problem+json")
    problem = refused.json()
    assert (problem["code"], problem["field"]) == ("arguments_not_editable", "body.arguments")
    assert "review_pipeline" not in problem["detail"]
    pending = host.client.get(f"/api/runs/{run_id}/approvals", params={"status": "pending"}).json()["approvals"]
    assert [a["approval_id"] for a in pending] == [gate["approval_id"]]  # nothing was decided

    unchanged = host.client.post(url, json={"decision": "approve", "arguments": gate["arguments"]})
    assert unchanged.status_code == 202, unchanged.text
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "completed" and done["output"]["published"] is True
