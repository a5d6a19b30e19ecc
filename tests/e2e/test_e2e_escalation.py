"""Escalation of agent-run approvals (`on_approval_timeout=Escalate(...)`), in virtual time: at the first deadline
the undecided calls go to someone else with a new deadline (same approvals, still decidable through the same
route), and only the second deadline applies the final action. A decision racing the escalation step wins."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from e2e_harness import PROGRESS_TIMEOUT_S, InProcessApp, parallel_calls, pending_ids
from e2e_settings import watches_the_app_in_process
from step_pause import paused
from test_e2e_approval_events import assert_applied_once, emails
from test_e2e_streams import of, read_until, sse

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


@watches_the_app_in_process  # the stream's watcher
def test_an_escalation_reaches_a_stream_that_read_the_run_while_it_was_being_stored(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer
) -> None:
    """The same, through a real SSE client: the stream's watcher reads the run while the escalation is half stored
    (one approval handed on, the other not yet), and still gets the status with both escalated once it is stored.
    Before, that read was its last (the progress did not change again): the stream went quiet until its time limit."""
    with app_with(STREAM_MAX_SECONDS="20") as app:
        model.set_script(Script.of(parallel_calls("send_email", *emails(2)), "Done."))
        run_id = app.start(agent="escalating", input="please")["run_id"]
        watchers = app.app_module("http_api.streams.watchers").REGISTRY
        with sse(app, run_id) as source:
            events = source.iter_sse()
            read_until(events, lambda e: e.event == "status" and e.json()["status"] == "requires_action")
            with paused(app, "escalate_approval") as escalating:
                app.host.clock.advance(FIRST_DEADLINE_S + 1)
                escalating.wait_reached()
                [stats] = watchers.stats(run_id)
                reads, deadline = stats.state_reads, time.monotonic() + PROGRESS_TIMEOUT_S
                while stats.state_reads < reads + 2:  # the watcher has read the run during the escalation
                    assert time.monotonic() < deadline, "the stream's watcher stopped reading the run"
                    time.sleep(0.01)
            seen = read_until(events, lambda e: e.event == "status" and _all_escalated(e.json()))
    [status] = [s for s in of(seen, "status") if _all_escalated(s)]
    assert status["status"] == "requires_action" and len(status["pending_approvals"]) == 2


def _all_escalated(status: dict[str, Any]) -> bool:
    pending = status["pending_approvals"]
    return bool(pending) and all(a["escalated_to"] == "role:Supervisors" for a in pending)
