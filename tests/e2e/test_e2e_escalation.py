"""Escalation of agent-run approvals (`on_approval_timeout=Escalate(...)`), in virtual time: at the first deadline
the undecided calls go to someone else with a new deadline (same approvals, still decidable through the same
route), and only the second deadline applies the final action. A decision racing the escalation step wins."""

from __future__ import annotations

from datetime import datetime

from e2e_harness import InProcessApp, parallel_calls, pending_ids
from step_pause import paused
from test_e2e_approval_events import assert_applied_once, emails

from scripted_model import Script, ScriptedModelServer

FIRST_DEADLINE_S, ESCALATION_S = 600, 3600


def test_an_undecided_approval_is_escalated_then_decided(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(parallel_calls("send_email", *emails(1)), "Sent."))
    view = app.start_until_approval(agent="escalating")
    [pending] = view["pending_approvals"]
    assert pending["escalated_to"] is None
    app.advance(FIRST_DEADLINE_S + 1)

    escalated = app.view(view["run_id"])
    assert escalated["status"] == "requires_action"
    [now_pending] = escalated["pending_approvals"]
    assert (now_pending["approval_id"], now_pending["escalated_to"]) == (pending["approval_id"], "role:Supervisors")
    moved = datetime.fromisoformat(now_pending["expires_at"]) - datetime.fromisoformat(pending["expires_at"])
    assert moved.total_seconds() >= ESCALATION_S
    [record] = app.approvals(view["run_id"])
    assert (record["status"], record["escalated_to"]) == ("pending", "role:Supervisors") and record["escalated_at"]

    assert app.decide(view["run_id"], pending["approval_id"], "approve").status_code == 202
    app.settle()
    assert_applied_once(app, view, emails(1))


def test_nobody_decides_after_the_escalation_either(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(parallel_calls("send_email", *emails(1)), "Sent."))
    view = app.start_until_approval(agent="escalating")
    app.advance(FIRST_DEADLINE_S + 1)
    assert app.view(view["run_id"])["status"] == "requires_action"
    app.advance(ESCALATION_S + 1)
    response = app.poll(view["run_id"])
    final = response.json()
    assert (response.status_code, final["status"], final["error"]["code"]) == (500, "failed", "approval_timeout")
    assert [a["status"] for a in app.approvals(view["run_id"])] == ["expired"]
    assert app.effects(view["session_id"], "email") == []


def test_a_decision_that_arrives_during_the_escalation(app: InProcessApp, model: ScriptedModelServer) -> None:
    batch = emails(2)
    model.set_script(Script.of(parallel_calls("send_email", *batch), "Done."))
    view = app.start_until_approval(agent="escalating")
    first, second = pending_ids(view)
    with paused(app, "escalate_approval") as escalating:
        app.host.clock.advance(FIRST_DEADLINE_S + 1)
        escalating.wait_reached()  # the first approval is escalated, the second not yet
        assert app.decide(view["run_id"], second, "approve").status_code == 202
    app.settle()
    records = {r["approval_id"]: (r["status"], r["escalated_to"]) for r in app.approvals(view["run_id"])}
    assert records == {first: ("pending", "role:Supervisors"), second: ("approved", None)}
    assert pending_ids(app.view(view["run_id"])) == [first]
    assert app.decide(view["run_id"], first, "approve").status_code == 202
    app.settle()
    assert_applied_once(app, view, batch)


def test_the_progress_announces_the_new_deadline_once_the_escalation_is_stored(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """A stream (the page's run view) follows a run by its orchestration's progress and reads the approvals again
    when the progress changes. The progress announced the escalation's new deadline when the step was scheduled,
    before the store held it: a stream that read the approvals meanwhile kept them as they were, and nothing changed
    in the progress afterwards, so the page never offered an approval escalated to its viewer. It is announced once
    every approval of the batch is escalated in the store."""
    batch = emails(2)
    model.set_script(Script.of(parallel_calls("send_email", *batch), "Done."))
    view = app.start_until_approval(agent="escalating")
    first_deadline = app.host.get_status(view["run_id"])["customStatus"]["approvals_expire_at"]
    with paused(app, "escalate_approval") as escalating:
        app.host.clock.advance(FIRST_DEADLINE_S + 1)
        escalating.wait_reached()  # the first approval is escalated in the store, the second not yet
        assert app.host.get_status(view["run_id"])["customStatus"]["approvals_expire_at"] == first_deadline
    app.settle()
    announced = app.host.get_status(view["run_id"])["customStatus"]["approvals_expire_at"]
    records = app.approvals(view["run_id"])
    assert [r["escalated_to"] for r in records] == ["role:Supervisors", "role:Supervisors"]
    assert {datetime.fromisoformat(r["expires_at"]) for r in records} == {datetime.fromisoformat(announced)}
    assert announced != first_deadline
