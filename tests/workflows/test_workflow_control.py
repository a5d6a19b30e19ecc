"""Workflow control over HTTP: cancel (child runs too), fan-out concurrency, signals, delays at a time, failing
steps, an eternal monitor that continues as new, input validation and continuation tokens."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from workflow_helpers import child_run, decide, model_prompts, settle, start, step_ids, view
from workflow_scripts import standard_script

from agent_runs.budget import PAYLOAD_BUDGET_BYTES
from agent_runtime.loop import AgentLoop
from scripted_model.script import Fault, Match, Reply, Rule

TERMINAL = {"Completed", "Failed", "Terminated", "Canceled"}


def _problem(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["code"] == code
    return body


def test_cancel_mid_workflow_cancels_the_running_child_run(host) -> None:
    run_id = start(host, "cancel_flow", {"topic": "the launch"})["run_id"]
    settle(host)
    running = view(host, run_id)
    assert running["status"] == "in_progress" and running["active_step"]["id"] == "mail"
    [child_id] = running["active_step"]["child_runs"]
    pending = host.client.get(f"/api/runs/{child_id}/approvals", params={"status": "pending"}).json()["approvals"]
    assert len(pending) == 1  # the child run waits for a person: it would run for a day

    response = host.client.post(f"/api/workflows/runs/{run_id}/cancel")
    assert response.status_code == 202 and response.json()["cancelled_child_runs"] == [child_id]
    settle(host)

    done = host.client.get(f"/api/workflows/runs/{run_id}")
    assert done.status_code == 200 and done.json()["status"] == "cancelled"
    assert child_run(host, child_id, child_id)["status"] == "cancelled"
    assert host.get_status(child_id)["runtimeStatus"] in TERMINAL
    assert host.get_status(run_id)["runtimeStatus"] in TERMINAL
    assert "after" not in step_ids(done.json())
    again = host.client.post(f"/api/workflows/runs/{run_id}/cancel")
    _problem(again, 409, "workflow_finished")


def _fan_out_with_a_waiting_branch(host) -> tuple[str, list[str]]:
    run_id = start(host, "parallel_wait_flow", {"topic": "a DPA"})["run_id"]
    settle(host)
    children = view(host, run_id)["active_step"]["child_runs"]
    mailer, legal, finance = children
    # The experts finished while the mailer still waits for its approval: the branches did not run one by one.
    assert child_run(host, legal, legal)["status"] == "completed"
    assert child_run(host, finance, finance)["status"] == "completed"
    assert child_run(host, mailer, mailer)["status"] != "completed"
    return run_id, children


def test_parallel_branches_run_concurrently_and_cancel_reaches_the_one_still_running(host) -> None:
    run_id, (mailer, legal, _) = _fan_out_with_a_waiting_branch(host)
    response = host.client.post(f"/api/workflows/runs/{run_id}/cancel")
    assert response.json()["cancelled_child_runs"] == [mailer]
    settle(host)
    assert view(host, run_id)["status"] == "cancelled"
    assert child_run(host, mailer, mailer)["status"] == "cancelled"
    assert child_run(host, legal, legal)["status"] == "completed"
    assert all(host.get_status(child)["runtimeStatus"] in TERMINAL for child in (mailer, legal))


@pytest.mark.skipif(
    not hasattr(AgentLoop, "awaiting_approval"),
    reason="approving a tool call needs AgentLoop.awaiting_approval (runs branch a1b5c0d, not yet on this base)",
)
def test_a_child_runs_tool_approval_goes_through_the_run_routes(host) -> None:
    run_id, (mailer, _, _) = _fan_out_with_a_waiting_branch(host)
    [approval] = host.client.get(f"/api/runs/{mailer}/approvals", params={"status": "pending"}).json()["approvals"]
    decide(host, mailer, approval["approval_id"])
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "completed", done["error"]
    assert done["output"]["legal"] == "Legal: acceptable with a DPA."
    assert done["output"]["mail"] == "Hello again! Just following up on your ticket."


def test_delay_until_a_time_then_a_signal_with_its_payload(host, model) -> None:
    at = host.engine.now() + timedelta(hours=1)
    run_id = start(host, "signal_flow", {"at": at.isoformat()})["run_id"]
    settle(host)
    delayed = view(host, run_id)
    assert delayed["status"] == "waiting" and delayed["active_step"]["id"] == "until_start"

    host.advance(3600)
    waiting = view(host, run_id)
    assert waiting["pending_signals"] == ["data_ready"]
    _problem(host.client.post(f"/api/workflows/runs/{run_id}/signals/other", json={}), 404, "signal_not_found")

    sent = host.client.post(
        f"/api/workflows/runs/{run_id}/signals/data_ready", json={"payload": {"fact": "42 is the answer"}}
    )
    assert sent.status_code == 202, sent.text
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "completed"
    assert done["output"] == {"fact": "42 is the answer", "draft": "First draft about durable agents."}
    assert any("42 is the answer" in prompt for prompt in model_prompts(model, "You are a writer"))
    late = host.client.post(f"/api/workflows/runs/{run_id}/signals/data_ready", json={"payload": 1})
    _problem(late, 409, "workflow_finished")


def test_a_signal_that_never_comes_fails_the_step_on_timeout(host) -> None:
    run_id = start(host, "signal_flow", {"at": host.engine.now().isoformat()})["run_id"]
    settle(host)
    host.advance(1)
    host.advance(3601)
    failed = view(host, run_id)
    assert failed["status"] == "failed"
    assert failed["error"]["step"] == "data" and "no 'data_ready' signal" in failed["error"]["message"]


def test_a_failing_function_step_is_named_with_its_reason(host) -> None:
    run_id = start(host, "failing_flow", {})["run_id"]
    settle(host)
    response = host.client.get(f"/api/workflows/runs/{run_id}")
    assert response.status_code == 500  # never 200 for a failed run; the body names the step and why
    failed = response.json()
    assert failed["status"] == "failed" and failed["continuation_token"] is None
    assert failed["error"]["code"] == "step_failed" and failed["error"]["step"] == "add_up"
    # The exception's type names what went wrong; its text (user code's, may hold anything) goes to the log only.
    message = failed["error"]["message"]
    assert "its function raised ValueError (correlation id " in message and "do not add up" not in message
    entry = next(e for e in failed["steps"] if e["step"] == "add_up")
    assert entry["status"] == "failed" and "ValueError" in entry["error"] and "do not add up" not in entry["error"]
    assert "never" not in step_ids(failed)


def test_a_failing_agent_step_names_the_step_and_the_model_error(host, model) -> None:
    model.set_script(
        standard_script().model_copy(
            update={"rules": [Rule(match=Match(system="You are a writer"), reply=Reply(fault=Fault.bad_request()))]}
        )
    )
    run_id = start(host, "failing_flow", {})["run_id"]
    settle(host)
    failed = view(host, run_id)
    assert failed["status"] == "failed" and failed["error"]["step"] == "write"
    message = failed["error"]["message"]
    assert f"agent run '{run_id}.write' (writer) ended failed" in message and "400" in message


def test_an_eternal_monitor_continues_as_new_with_a_small_status(host) -> None:
    run_id = start(host, "eternal_monitor", {})["run_id"]
    settle(host)
    for _ in range(60):  # 60 hours of hourly checks
        host.advance(3600)
    status = host.get_status(run_id)
    assert status["runtimeStatus"] == "Running"
    assert status["customStatus"]["generation"] >= 4
    assert status["customStatus"]["iteration"] == 61  # 61 checks done, sleeping before the next
    assert len(json.dumps(status["customStatus"])) < PAYLOAD_BUDGET_BYTES
    assert len(json.dumps(status["input"])) < PAYLOAD_BUDGET_BYTES  # the continue-as-new input stays small too
    polled = view(host, run_id)
    assert polled["status"] == "waiting" and polled["active_step"]["iteration"] == 61

    assert host.client.post(f"/api/workflows/runs/{run_id}/cancel").status_code == 202
    settle(host)
    assert view(host, run_id)["status"] == "cancelled"
    assert host.get_status(run_id)["runtimeStatus"] in TERMINAL


def test_list_definitions_and_input_validation(host) -> None:
    listed = host.client.get("/api/workflows").json()["workflows"]
    by_name = {w["name"]: w for w in listed}
    assert {"review_pipeline", "expert_panel", "follow_up"} <= set(by_name)
    assert by_name["review_pipeline"]["input_schema"]["required"] == ["topic"]
    assert by_name["follow_up"]["session_agent"] == "assistant"
    assert by_name["signal_flow"]["signals"] == ["data_ready"]
    assert [s["id"] for s in by_name["expert_panel"]["steps"]] == [
        "panel", "legal", "finance", "technical", "recommendation"
    ]

    _problem(host.client.get("/api/workflows/nope"), 404, "workflow_not_found")
    _problem(host.client.post("/api/workflows/nope/runs", json={"input": {}}), 404, "workflow_not_found")
    bad = _problem(host.client.post("/api/workflows/review_pipeline/runs", json={"input": {}}), 422,
                   "validation_failed")
    assert bad["field"] == "body.input.topic"
    no_session = host.client.post(
        "/api/workflows/expert_panel/runs", json={"input": {"question": "q"}, "session_id": "abc"}
    )
    _problem(no_session, 422, "workflow_has_no_session")
    chat = host.client.post("/api/agents/writer/runs", json={"input": "hi", "wait_seconds": 5}).json()
    mismatch = host.client.post(
        "/api/workflows/follow_up/runs", json={"input": {"ticket": "T-1"}, "session_id": chat["session_id"]}
    )
    _problem(mismatch, 409, "session_agent_mismatch")
    _problem(host.client.get("/api/workflows/runs/nope"), 404, "workflow_run_not_found")


def test_continuation_tokens_deliver_each_finished_step_once(host) -> None:
    first = start(host, "review_pipeline", {"topic": "tokens"})
    settle(host)
    run_id = first["run_id"]
    page = view(host, run_id, continuation_token=first["continuation_token"])
    assert step_ids(page) == ["write", "review", "needs_revision", "revise", "final"]
    assert view(host, run_id, continuation_token=page["continuation_token"])["steps"] == []
    [gate] = page["pending_approvals"]
    decide(host, run_id, gate["approval_id"])
    settle(host)
    last = view(host, run_id, continuation_token=page["continuation_token"])
    assert step_ids(last) == ["sign_off"] and last["continuation_token"] is None
    forged = host.client.get(f"/api/workflows/runs/{run_id}", params={"continuation_token": "x.y.z"})
    assert forged.status_code == 401


@pytest.mark.parametrize("decision", ["reject"])
def test_a_rejected_sign_off_completes_unpublished(host, decision: str) -> None:
    run_id = start(host, "review_pipeline", {"topic": "rejection"})["run_id"]
    settle(host)
    [gate] = view(host, run_id)["pending_approvals"]
    decide(host, run_id, gate["approval_id"], decision)
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "completed" and done["output"]["published"] is False
    already = host.client.post(f"/api/runs/{run_id}/approvals/{gate['approval_id']}", json={"decision": "approve"})
    assert already.status_code in (409, 410)


def test_a_step_whose_activity_keeps_failing_fails_named_with_a_stable_code(host, caplog) -> None:
    # The caller's session is busy (its own run waits for an approval) when the follow-up is due.
    chat = host.client.post(
        "/api/agents/assistant/runs",
        json={"input": "Please email bob", "wait_seconds": 10, "approval_timeout_seconds": 7 * 86400},
    )
    assert chat.json()["status"] == "requires_action"
    run_id = start(host, "follow_up", {"ticket": "T-7"}, session_id=chat.json()["session_id"])["run_id"]
    settle(host)
    host.advance(2 * 86400)
    for _ in range(3):  # the durable retries of the failing activity wait on timers
        host.advance(60)
    failed = view(host, run_id)
    assert failed["status"] == "failed" and failed["error"]["step"] == "follow_up"
    error = failed["error"]
    assert error["code"] == "activity_failed" and "internal step failed" in error["message"]
    assert "(correlation id " in error["message"]
    assert "SessionBusyError" not in error["message"] and "Activity" not in error["message"]
    correlation_id = error["message"].rsplit("correlation id ", 1)[1].rstrip(")")
    logged = [r.getMessage() for r in caplog.records if correlation_id in r.getMessage()]
    assert logged and "SessionBusyError" in logged[0]  # the detail is in the log, under the id the client sees


def test_a_signal_sent_before_the_workflow_waits_for_it_is_kept(host) -> None:
    run_id = start(host, "signal_flow", {"at": (host.engine.now() + timedelta(hours=1)).isoformat()})["run_id"]
    settle(host)
    early = host.client.post(f"/api/workflows/runs/{run_id}/signals/data_ready", json={"payload": {"fact": "early"}})
    assert early.status_code == 202
    host.advance(3600)
    done = view(host, run_id)
    assert done["status"] == "completed" and done["output"]["fact"] == "early"


def test_cancel_at_an_approval_gate_closes_the_gate(host) -> None:
    run_id = start(host, "review_pipeline", {"topic": "cancelled"})["run_id"]
    settle(host)
    [gate] = view(host, run_id)["pending_approvals"]
    assert host.client.post(f"/api/workflows/runs/{run_id}/cancel").status_code == 202
    settle(host)
    assert view(host, run_id)["status"] == "cancelled"
    [closed] = host.client.get(f"/api/runs/{run_id}/approvals").json()["approvals"]
    assert closed["approval_id"] == gate["approval_id"] and closed["status"] == "expired"
    late = host.client.post(f"/api/runs/{run_id}/approvals/{gate['approval_id']}", json={"decision": "approve"})
    assert late.status_code == 409 and late.json()["code"] == "run_finished"  # the run ended; not its deadline


def test_fan_in_with_a_merge_function(host) -> None:
    response = host.client.post(
        "/api/workflows/function_merge_flow/runs", json={"input": {"topic": "a DPA"}, "wait_seconds": 20}
    )
    assert response.status_code == 200, response.text
    assert response.json()["output"] == {"joined": "Legal: acceptable with a DPA. | Finance: pays back in a year."}
