"""Human approval of tool calls, end to end: approve, reject, a partly approved batch, edited arguments, and the
approval timer (virtual clock) with both timeout behaviours. The side effects are read from the store's effect
ledger, where the tools record them."""

from __future__ import annotations

import json
from typing import Any

from e2e_harness import InProcessApp, contents_of, parallel_calls, pending_ids

from scripted_model import Reply, Script, ScriptedModelServer

EMAIL_BOB = {"to": "bob@example.com", "subject": "Hi", "body": "Hello Bob"}
EMAIL_EVE = {"to": "eve@example.com", "subject": "Hi", "body": "Hello Eve"}
# AUTH_MODE=none ignores principal headers (anyone can send them): the decision is the anonymous principal's.
# Audits with validated identities: tests/auth.
AUDITOR = {"x-ms-client-principal-name": "alice@example.com"}


def tool_messages(model: ScriptedModelServer) -> list[str]:
    """What the model was told about its tool calls in the last request."""
    return [m["content"] for m in model.log.last.messages if m["role"] == "tool"]


def test_approved_call_runs_once_and_is_audited(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    view = app.start_until_approval()
    run_id, session_id = view["run_id"], view["session_id"]
    [pending] = view["pending_approvals"]
    assert (pending["tool"], pending["arguments"]) == ("send_email", EMAIL_BOB)
    assert pending["expires_at"]
    assert app.effects(session_id) == []  # nothing is sent before a person says so
    # The poller sees the request among the updates too (seed 002's approval request content).
    contents = [c for u in view["updates"] for c in u["message"]["contents"]]
    assert [c["id"] for c in contents if c["type"] == "function_approval_request"] == [pending["approval_id"]]

    response = app.http.post(
        f"/api/runs/{run_id}/approvals/{pending['approval_id']}", json={"decision": "approve"}, headers=AUDITOR
    )
    assert response.status_code == 202
    app.settle()

    view = app.view(run_id)
    assert (view["status"], view["output"]["text"]) == ("completed", "Sent.")
    assert app.effects(session_id, "email") == [EMAIL_BOB]
    [record] = app.approvals(run_id)
    assert (record["status"], record["decided_by"]) == ("approved", "anonymous")
    assert record["decided_at"]
    assert '"status": "sent"' in tool_messages(model)[0]
    # The decision is part of the conversation too (seed 002's approval response), with who decided.
    responses = [m for m in app.session_messages(session_id) if contents_of(m) == ["function_approval_response"]]
    assert [(m["contents"][0]["approved"], m.get("author_name")) for m in responses] == [(True, "anonymous")]


def test_rejected_call_never_runs(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Not sent, as you wish."))
    view = app.start_until_approval()
    [approval_id] = pending_ids(view)

    response = app.decide(view["run_id"], approval_id, "reject", reason="not today")
    assert response.status_code == 202
    app.settle()

    final = app.view(view["run_id"])
    assert (final["status"], final["output"]["text"]) == ("completed", "Not sent, as you wish.")
    assert app.effects(view["session_id"]) == []
    [told] = tool_messages(model)
    assert "denied" in told and "not today" in told
    assert app.approvals(view["run_id"])[0]["status"] == "rejected"


def test_partially_approved_batch(app: InProcessApp, model: ScriptedModelServer) -> None:
    both = parallel_calls("send_email", EMAIL_BOB, EMAIL_EVE)
    model.set_script(Script.of(both, "Sent to Bob only."))
    view = app.start_until_approval()
    by_recipient = {a["arguments"]["to"]: a["approval_id"] for a in view["pending_approvals"]}
    assert set(by_recipient) == {"bob@example.com", "eve@example.com"}

    assert app.decide(view["run_id"], by_recipient["bob@example.com"], "approve").status_code == 202
    app.settle()
    halfway = app.view(view["run_id"])
    assert halfway["status"] == "requires_action"  # one decision is still missing: nothing ran yet
    assert pending_ids(halfway) == [by_recipient["eve@example.com"]]
    assert app.effects(view["session_id"]) == []

    assert app.decide(view["run_id"], by_recipient["eve@example.com"], "reject", reason="no").status_code == 202
    app.settle()

    assert app.view(view["run_id"])["status"] == "completed"
    assert app.effects(view["session_id"], "email") == [EMAIL_BOB]
    told = tool_messages(model)
    assert len(told) == 2 and '"status": "sent"' in told[0] and "denied" in told[1]


def test_approved_with_edited_arguments(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 900}), "Transferred."))
    view = app.start_until_approval()
    [approval_id] = pending_ids(view)

    edited = {"account": "GB1234", "amount": 90}
    assert app.decide(view["run_id"], approval_id, "approve", arguments=edited).status_code == 202
    app.settle()

    assert app.view(view["run_id"])["status"] == "completed"
    assert app.effects(view["session_id"], "transfer") == [edited]  # the tool ran with what the person approved
    [record] = app.approvals(view["run_id"])
    assert (record["status"], record["arguments"], record["edited_arguments"]) == (
        "approved",
        {"account": "GB1234", "amount": 900},
        edited,
    )
    assert '"amount": 90' in tool_messages(model)[0]


def test_timeout_rejects_the_calls(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Nobody approved it."))
    view = app.start_until_approval(approval_timeout_seconds=600)

    app.advance(599)
    assert app.view(view["run_id"])["status"] == "requires_action"  # the timer has not fired yet
    app.advance(2)

    final = app.view(view["run_id"])
    assert (final["status"], final["output"]["text"]) == ("completed", "Nobody approved it.")
    assert app.effects(view["session_id"]) == []
    assert [a["status"] for a in app.approvals(view["run_id"])] == ["expired"]
    assert "denied" in tool_messages(model)[0]


def test_timeout_fails_the_run_when_the_agent_says_so(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "never reached"))
    view = app.start_until_approval(agent="strict")  # approval_timeout_seconds=600, on_approval_timeout="fail"

    app.advance(601)

    response = app.poll(view["run_id"])
    final = response.json()
    assert response.status_code == 500  # never 200 for a failed run
    assert final["status"] == "failed"
    assert final["error"]["code"] == "approval_timeout"
    assert final["output"] is None and final["continuation_token"] is None
    assert len(model.log.requests) == 1  # the model was not asked again
    assert app.effects(view["session_id"]) == []
    assert [a["status"] for a in app.approvals(view["run_id"])] == ["expired"]


def waiting_after_continue_as_new(app: InProcessApp, model: ScriptedModelServer) -> dict[str, Any]:
    """A run that asks for approval after 9 model calls, i.e. in its second execution (continue-as-new every 8)."""
    lookups = [Reply.call("lookup", {"key": f"k{i}"}) for i in range(9)]
    model.set_script(Script.of(*lookups, Reply.call("send_email", EMAIL_BOB), "Sent after nine lookups."))
    view = app.start_until_approval()
    run_input = app.history(view["run_id"])["input"]
    assert json.loads(run_input)["generation"] == 1
    return view


def test_approval_in_a_continued_execution(app: InProcessApp, model: ScriptedModelServer) -> None:
    view = waiting_after_continue_as_new(app, model)
    [approval_id] = pending_ids(view)

    assert app.decide(view["run_id"], approval_id, "approve").status_code == 202
    app.settle()

    final = app.view(view["run_id"])
    assert (final["status"], final["output"]["text"]) == ("completed", "Sent after nine lookups.")
    assert app.effects(view["session_id"], "email") == [EMAIL_BOB]
    stored = app.session_messages(view["session_id"])
    assert [u["seq"] for u in final["updates"]] == [m["seq"] for m in stored]  # one conversation across executions
    assert len(stored) == 1 + 9 * 2 + 4 + 1  # input, 9 x (call, result), call/request/response/result, answer


def test_cancel_in_a_continued_execution(app: InProcessApp, model: ScriptedModelServer) -> None:
    view = waiting_after_continue_as_new(app, model)

    assert app.cancel(view["run_id"]).status_code == 202
    app.settle()

    assert app.view(view["run_id"])["status"] == "cancelled"
    assert app.effects(view["session_id"]) == []


def test_a_stored_decision_whose_event_was_lost_wins_over_the_timeout(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The API stores a decision, then raises the event; if the event never arrives (the API crashed in between),
    the timeout finds the stored decision and honours it, so the store and the run never disagree."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent at the deadline."))
    view = app.start_until_approval(approval_timeout_seconds=600)
    [approval_id] = pending_ids(view)
    app.store_call(lambda store: store.decide_approval(approval_id, "approved", decided_by="alice@example.com"))

    app.advance(601)

    final = app.view(view["run_id"])
    assert (final["status"], final["output"]["text"]) == ("completed", "Sent at the deadline.")
    assert app.effects(view["session_id"], "email") == [EMAIL_BOB]
    [record] = app.approvals(view["run_id"])
    assert (record["status"], record["decided_by"]) == ("approved", "alice@example.com")


def test_timeout_after_a_partial_decision(app: InProcessApp, model: ScriptedModelServer) -> None:
    both = parallel_calls("send_email", EMAIL_BOB, EMAIL_EVE)
    model.set_script(Script.of(both, "Bob's email went out."))
    view = app.start_until_approval(approval_timeout_seconds=600)
    by_recipient = {a["arguments"]["to"]: a["approval_id"] for a in view["pending_approvals"]}
    assert app.decide(view["run_id"], by_recipient["bob@example.com"], "approve").status_code == 202
    app.settle()

    app.advance(601)

    assert app.view(view["run_id"])["status"] == "completed"
    assert app.effects(view["session_id"], "email") == [EMAIL_BOB]
    statuses = {a["arguments"]["to"]: a["status"] for a in app.approvals(view["run_id"])}
    assert statuses == {"bob@example.com": "approved", "eve@example.com": "expired"}
    told = tool_messages(model)
    assert '"status": "sent"' in told[0] and "denied" in told[1]


def test_two_approval_rounds_in_one_run(app: InProcessApp, model: ScriptedModelServer) -> None:
    transfer = {"account": "GB1234", "amount": 5}
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), Reply.call("transfer", transfer), "Both done."))
    first = app.start_until_approval()
    assert app.decide(first["run_id"], pending_ids(first)[0], "approve").status_code == 202
    app.settle()
    second = app.view(first["run_id"])
    assert second["status"] == "requires_action"
    assert [a["tool"] for a in second["pending_approvals"]] == ["transfer"]

    assert app.decide(first["run_id"], pending_ids(second)[0], "approve").status_code == 202
    app.settle()

    assert app.view(first["run_id"])["output"]["text"] == "Both done."
    assert app.effects(first["session_id"], "email") == [EMAIL_BOB]
    assert app.effects(first["session_id"], "transfer") == [transfer]
