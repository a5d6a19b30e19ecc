"""The three shipped workflows end to end over HTTP on devhost (virtual clock), with the real openai client talking
to the scripted model: the 24 h escalation, the two-day delay and the week-long monitor run in test time."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from workflow_helpers import child_run, decide, model_prompts, settle, start, step_ids, view
from workflow_scripts import REVIEW_APPROVE, standard_script

DAY = 86400


def test_review_pipeline_revises_then_a_person_signs_off(host, model) -> None:
    run_id = start(host, "review_pipeline", {"topic": "durable agents"})["run_id"]
    settle(host)

    waiting = view(host, run_id)
    assert waiting["status"] == "requires_action"
    assert step_ids(waiting) == ["write", "review", "needs_revision", "revise", "final"]
    [gate] = waiting["pending_approvals"]
    assert waiting["active_step"]["id"] == "sign_off"
    assert waiting["active_step"]["waiting_for_approval"] == gate["approval_id"]
    assert gate["tool"] == "workflow_gate:sign_off"
    assert "Revised draft" in gate["arguments"]["message"] and gate["arguments"]["approver"] == "editor"
    # The reviewer's structured verdict drove the branch; the revision saw the review's comments.
    assert any("Tighten the intro." in prompt for prompt in model_prompts(model, "You are a writer"))

    decide(host, run_id, gate["approval_id"], **{"x-ms-client-principal-name": "ed@example.com"})
    settle(host)
    done = host.client.get(f"/api/workflows/runs/{run_id}")
    assert done.status_code == 200
    body = done.json()
    assert body["status"] == "completed" and body["continuation_token"] is None
    assert body["output"] == {
        "draft": "Revised draft: tight and clear.",
        "revised": True,
        "review": {"verdict": "revise", "score": 6, "comments": "Tighten the intro."},
        "published": True,
        "decided_by": "anonymous",  # AUTH_MODE=none ignores principal headers (approvers by identity: tests/auth)
        "escalated": False,
    }
    # Child runs are ordinary runs: pollable on the run routes.
    write = waiting["steps"][0]["output"]
    child = child_run(host, write["run_id"], write["session_id"])
    assert child["status"] == "completed"


@pytest.mark.parametrize("escalation_decides", [True, False])
def test_review_pipeline_escalates_after_24_hours(host, model, escalation_decides: bool) -> None:
    model.set_script(standard_script(review=REVIEW_APPROVE))
    run_id = start(host, "review_pipeline", {"topic": "durable agents"})["run_id"]
    settle(host)
    [first] = view(host, run_id)["pending_approvals"]
    assert "needs_revision" in step_ids(view(host, run_id)) and "revise" not in step_ids(view(host, run_id))

    host.advance(DAY + 1)
    escalated = view(host, run_id)
    assert escalated["status"] == "requires_action"
    [second] = escalated["pending_approvals"]
    assert second["approval_id"] != first["approval_id"]
    assert second["arguments"]["escalated"] is True and second["arguments"]["approver"] == "editor-in-chief"
    expired = host.client.get(f"/api/runs/{run_id}/approvals", params={"status": "expired"}).json()["approvals"]
    assert [a["approval_id"] for a in expired] == [first["approval_id"]]

    if escalation_decides:
        decide(host, run_id, second["approval_id"], **{"x-ms-client-principal-name": "chief@example.com"})
        settle(host)
    else:
        host.advance(DAY + 1)
    output = view(host, run_id)["output"]
    assert output["escalated"] is True and output["revised"] is False
    assert output["published"] is escalation_decides
    assert output["decided_by"] == ("anonymous" if escalation_decides else None)  # AUTH_MODE=none


def test_expert_panel_asks_three_experts_at_once_then_merges(host, model) -> None:
    response = host.client.post(
        "/api/workflows/expert_panel/runs", json={"input": {"question": "Adopt durable agents?"}, "wait_seconds": 20}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "completed"
    assert body["output"] == {
        "recommendation": "Recommendation: go ahead, sign a DPA first.",
        "legal": "Legal: acceptable with a DPA.",
        "finance": "Finance: pays back in a year.",
        "technical": "Technical: feasible in a quarter.",
    }
    panel, merge = body["steps"]
    assert merge["step"] == "recommendation"
    assert panel["kind"] == "parallel" and len(panel["run_ids"]) == 3
    [chair_prompt] = model_prompts(model, "chair a panel")
    for opinion in ("Legal: acceptable", "Finance: pays back", "Technical: feasible"):
        assert opinion in chair_prompt
    for run_id in panel["run_ids"]:
        assert child_run(host, run_id, run_id)["status"] == "completed"  # each in a session of its own


def test_follow_up_runs_after_two_days_in_the_callers_session_and_stops_when_resolved(host, model) -> None:
    model.set_script(standard_script(resolved_after=3))
    chat = host.client.post("/api/agents/assistant/runs", json={"input": "My order is late", "wait_seconds": 10})
    session_id = chat.json()["session_id"]
    begin = host.engine.now()
    run_id = start(host, "follow_up", {"ticket": "T-42"}, session_id=session_id)["run_id"]
    settle(host)
    waiting = view(host, run_id)
    assert waiting["status"] == "waiting" and waiting["active_step"]["id"] == "wait"
    assert waiting["session_id"] == session_id

    host.advance(2 * DAY - 60)
    assert view(host, run_id)["active_step"]["id"] == "wait"  # not a minute early
    host.advance(60)
    after_follow_up = view(host, run_id)
    assert after_follow_up["active_step"]["id"] == "watch" and after_follow_up["active_step"]["iteration"] == 1
    waited = datetime.fromisoformat(after_follow_up["steps"][0]["output"]["until"])
    assert timedelta(days=2) <= waited - begin < timedelta(days=2, seconds=5)  # durable (virtual) time
    messages = host.client.get(f"/api/sessions/{session_id}/messages").json()["messages"]
    texts = [c.get("text") for m in messages for c in m.get("contents", []) if c.get("type") == "text"]
    assert texts[-1] == "Hello again! Just following up on your ticket." and "My order is late" in texts

    host.advance(12 * 3600)
    host.advance(12 * 3600)
    done = view(host, run_id)
    assert done["status"] == "completed"
    assert done["output"]["resolved"] is True and done["output"]["checks"] == 3
    assert done["output"]["follow_up"] == "Hello again! Just following up on your ticket."


def test_follow_up_monitor_gives_up_after_seven_days(host, model) -> None:
    run_id = start(host, "follow_up", {"ticket": "T-42"})["run_id"]
    host.wait_until_idle(timeout=90, skip_timers=True)  # every timer fires in order: 2 days + a week of checks
    done = view(host, run_id)
    assert done["status"] == "completed"
    assert done["output"]["resolved"] is False and done["output"]["status"] == "waiting for customer"
    assert done["output"]["checks"] == 15  # at 0 h, 12 h, ... 168 h after the follow-up
    status = host.get_status(run_id)
    assert status["customStatus"]["generation"] >= 1  # the long monitor continued as new
