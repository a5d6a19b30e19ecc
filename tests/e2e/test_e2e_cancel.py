"""Graceful cancel, end to end: while the run waits for a person, and while a model call is in flight (the call
finishes and is stored, then the run ends `cancelled`; the session is free for the next run)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e_harness import (
    PROGRESS_TIMEOUT_S,
    InProcessApp,
    contents_of,
    parallel_calls,
    unanswered_tool_calls,
    until_completed,
    wait_for_file,
)
from e2e_settings import watches_the_app_in_process

from scripted_model import Reply, Script, ScriptedModelServer

EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello"}


def assert_every_call_has_a_result(messages: list[dict]) -> None:
    """A cancelled run must leave a conversation the next model call accepts: no call without its result."""
    calls = {c["call_id"] for m in messages for c in m["contents"] if c["type"] == "function_call"}
    results = {c["call_id"] for m in messages for c in m["contents"] if c["type"] == "function_result"}
    assert calls <= results, f"calls without results: {calls - results}"


def test_cancel_while_waiting_for_approval(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Next run's answer."))
    started = app.start(input="Email Bob")
    app.settle()
    assert app.view(started["run_id"])["status"] == "requires_action"

    response = app.cancel(started["run_id"])
    assert (response.status_code, response.json()["status"]) == (202, "cancelling")
    app.settle()

    final = app.poll(started["run_id"])
    assert final.status_code == 200
    assert final.json()["status"] == "cancelled"
    assert final.json()["pending_approvals"] == []
    assert app.effects(started["session_id"]) == []  # the email was never sent
    assert [a["status"] for a in app.approvals(started["run_id"])] == ["expired"]
    assert len(model.log.requests) == 1
    assert_every_call_has_a_result(app.session_messages(started["session_id"]))
    # Deciding now is refused, and cancelling again says the run is over.
    approval_id = app.approvals(started["run_id"])[0]["approval_id"]
    late = app.decide(started["run_id"], approval_id, "approve")
    assert (late.status_code, late.json()["code"]) == (409, "run_finished")  # not "expired": the run is over
    assert app.cancel(started["run_id"]).status_code == 409
    # The session is free again, and its next run's model call accepts the conversation.
    nxt = app.start(input="Anything else?", session_id=started["session_id"])
    app.settle()
    assert app.view(nxt["run_id"])["status"] == "completed"
    assert unanswered_tool_calls(model.log.last.messages) == []


def test_cancel_while_a_model_call_runs(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("lookup", {"key": "k1"}), "never reached"))
    model.hold_answers()  # the call stays in flight until released (a latency would race the cancel)
    started = app.start(input="Look up k1")
    model.log.wait_for(1, timeout=PROGRESS_TIMEOUT_S)  # the model has the request: the call is in flight

    assert app.cancel(started["run_id"]).status_code == 202
    assert app.view(started["run_id"])["status"] == "in_progress"  # graceful: the call is allowed to finish
    model.release_answers()
    app.settle()

    view = app.view(started["run_id"])
    assert view["status"] == "cancelled"
    assert len(model.log.requests) == 1  # no further model call after the cancel
    messages = app.session_messages(started["session_id"])
    # The in-flight answer was stored (nothing lost), its tool never ran, and its call was closed with a result.
    assert [contents_of(m) for m in messages] == [["text"], ["function_call"], ["function_result"]]
    assert "value-of-k1" not in str(messages[-1])
    assert_every_call_has_a_result(messages)


def test_cancel_while_a_tool_runs_lets_it_finish(
    app: InProcessApp, model: ScriptedModelServer, marker_dir: Path
) -> None:
    model.set_script(Script.of(Reply.call("slow_step", {"label": "x"}), "never reached"))
    started = app.start(input="Do the slow step")
    wait_for_file(marker_dir / "slow_step.started")  # the tool is running

    assert app.cancel(started["run_id"]).status_code == 202
    assert app.view(started["run_id"])["status"] == "in_progress"  # not cut short: the tool is still running
    (marker_dir / "slow_step.release").touch()
    app.settle()

    assert app.view(started["run_id"])["status"] == "cancelled"
    messages = app.session_messages(started["session_id"])
    result = messages[-1]["contents"][0]
    assert result["type"] == "function_result" and result["result"] == {"label": "x", "first_attempt": True}
    assert app.effects(started["session_id"], "slow_step") == [{"label": "x"}]
    assert len(model.log.requests) == 1


def test_terminated_orchestration_closes_the_run(app: InProcessApp, model: ScriptedModelServer) -> None:
    """Terminate (the fallback when a graceful cancel cannot work) leaves the run closed and its session free."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Next run's answer."))
    started = app.start(input="Email Bob")
    app.settle()

    terminate = app.http.post(
        f"/runtime/webhooks/durabletask/instances/{started['run_id']}/terminate", params={"reason": "stuck"}
    )
    assert terminate.status_code == 202
    app.settle()

    view = app.view(started["run_id"])
    assert (view["status"], view["error"]["code"]) == ("cancelled", "run_terminated")
    assert [a["status"] for a in app.approvals(started["run_id"])] == ["expired"]
    assert_every_call_has_a_result(app.session_messages(started["session_id"]))
    nxt = app.start(input="again", session_id=started["session_id"])  # the session was released
    app.settle()
    assert app.view(nxt["run_id"])["status"] == "completed"
    assert unanswered_tool_calls(model.log.last.messages) == []  # the next model call got a valid conversation


def test_a_stored_cancel_whose_event_was_lost_still_cancels(
    app: InProcessApp, model: ScriptedModelServer, marker_dir: Path
) -> None:
    """The API stores the cancel request, then raises the event; an event that never arrives (lost at a
    continue-as-new boundary, or the API crashed in between) is caught by the next model call, and the run still
    ends `cancelled`, not `failed`."""
    model.set_script(Script.of(Reply.call("slow_step", {"label": "x"}), "never reached"))
    started = app.start(input="Do the slow step")
    wait_for_file(marker_dir / "slow_step.started")
    app.store_call(lambda store: store.update_run(started["run_id"], cancel_requested_at=datetime.now(UTC)))
    (marker_dir / "slow_step.release").touch()
    app.settle()

    view = app.view(started["run_id"])
    assert view["status"] == "cancelled", view["error"]
    assert len(model.log.requests) == 1  # the model was not asked again
    assert_every_call_has_a_result(app.session_messages(started["session_id"]))


def test_cancel_after_a_partial_decision(app: InProcessApp, model: ScriptedModelServer) -> None:
    """The second wait of a batch races cancel too (a waiter shared with the first wait would hang the replay)."""
    model.set_script(Script.of(parallel_calls("send_email", EMAIL, EMAIL), "never reached"))
    started = app.start_until_approval(input="Email Bob twice")
    first, _ = started["pending_approvals"]
    assert app.decide(started["run_id"], first["approval_id"], "approve").status_code == 202
    app.settle()

    assert app.cancel(started["run_id"]).status_code == 202
    app.settle()

    assert app.view(started["run_id"])["status"] == "cancelled"
    assert app.effects(started["session_id"]) == []  # the approved call never ran: its batch was not complete
    assert_every_call_has_a_result(app.session_messages(started["session_id"]))


def flag_cancel(app: InProcessApp, run_id: str) -> None:
    """What the cancel route writes first (`run_status.flag_cancel`), without the event it raises next: the window
    in which the run's step in flight ends before the event reaches its orchestration."""
    app.store_call(lambda store: store.update_run(run_id, cancel_requested_at=datetime.now(UTC)))


CANCELLED_BY_CLIENT = {"code": "cancelled", "message": "cancelled by the client"}


def final_answer_after_its_cancel_was_flagged(
    app: InProcessApp, model: ScriptedModelServer, agent: str = "helper"
) -> dict[str, Any]:
    """A run of `agent` whose cancel is flagged while its model call is in flight, then answered with a final answer
    that reaches the orchestration before the cancel event (never raised here); settled. Its start's answer."""
    model.set_script(Script.of("The answer."))
    model.hold_answers()
    started = app.start(agent=agent, input="A question")
    model.log.wait_for(1, timeout=PROGRESS_TIMEOUT_S)
    flag_cancel(app, started["run_id"])
    model.release_answers()
    app.settle()
    return started


def test_a_final_answer_that_reaches_the_orchestration_before_the_cancel_event_still_ends_cancelled(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """A cancel is flagged while the last model call is in flight, and its answer (final) reaches the orchestration
    before the cancel event: the run ends `cancelled`, as it does when the event comes first (it ended `completed`
    before, depending on which arrived first, though the client had its 202). The answer is kept in the session."""
    started = final_answer_after_its_cancel_was_flagged(app, model)

    view = app.view(started["run_id"])
    assert (view["status"], view["error"]) == ("cancelled", CANCELLED_BY_CLIENT)
    assert view["output"] is None and view["usage"]["total_tokens"] > 0  # the answer's usage is counted all the same
    assert [contents_of(m) for m in app.session_messages(started["session_id"])] == [["text"], ["text"]]
    assert app.cancel(started["run_id"]).status_code == 409  # over: a cancel now is too late


def test_a_run_that_finds_its_cancel_flagged_at_its_next_model_call_ends_with_the_cancels_reason(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """A cancel is flagged while a model call is in flight, its answer asks for a tool, and the cancel event never
    comes: the next model call finds the flag and the run ends `cancelled`, with the reason the cancel was flagged
    with, as every other end of a flagged run reports it (it said "cancelled" before)."""
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), "never reached"))
    model.hold_answers()
    started = app.start(input="Look a up")
    model.log.wait_for(1, timeout=PROGRESS_TIMEOUT_S)
    flag_cancel(app, started["run_id"])
    model.release_answers()
    app.settle()

    view = app.view(started["run_id"])
    assert (view["status"], view["error"]) == ("cancelled", CANCELLED_BY_CLIENT), view
    assert len(model.log.requests) == 1  # the model was not asked again
    assert_every_call_has_a_result(app.session_messages(started["session_id"]))


def test_an_approval_timeout_after_the_cancel_was_flagged_ends_the_run_cancelled(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The `strict` agent fails a run whose approval is not given in time; a cancel flagged before the timer fired
    wins (it ended `failed` with `approval_timeout` when the timer's episode came before the cancel event)."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "never reached"))
    started = app.start_until_approval(agent="strict", input="Email Bob")
    flag_cancel(app, started["run_id"])
    app.advance(601)

    view = app.view(started["run_id"])
    assert (view["status"], view["error"]["code"]) == ("cancelled", "cancelled"), view
    assert [a["status"] for a in app.approvals(started["run_id"])] == ["expired"]
    assert app.effects(started["session_id"]) == []
    assert_every_call_has_a_result(app.session_messages(started["session_id"]))
    nxt = app.start(agent="strict", input="again", session_id=started["session_id"])  # the session is free
    app.settle()
    assert app.view(nxt["run_id"])["status"] in ("completed", "requires_action")


@watches_the_app_in_process
def test_a_cancel_whose_event_comes_after_the_run_ended_is_accepted_when_its_flag_came_first(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cancel's flag is written, then the run ends before the cancel event is raised (the orchestration is gone
    and refuses it): the flag decided how the run ended, so the cancel took effect - 202, not 409."""
    model.set_script(Script.of("The answer."))
    model.hold_answers()
    started = app.start(input="A question")
    run_id = started["run_id"]
    model.log.wait_for(1, timeout=PROGRESS_TIMEOUT_S)
    gateway = app.app_module("http_api.durable_gateway").DurableGateway
    send_cancel = gateway.send_cancel

    async def after_the_run_ended(self: Any, instance_id: str, reason: str | None) -> None:
        model.release_answers()  # the answer ends the run (its call saw the cancel flag: the orchestrator closes it)
        await until_completed(self, instance_id)
        await send_cancel(self, instance_id, reason)

    monkeypatch.setattr(gateway, "send_cancel", after_the_run_ended)
    late = app.cancel(run_id)
    monkeypatch.undo()

    assert late.status_code == 202, late.text
    assert app.view(run_id)["status"] == "cancelled"
    assert app.cancel(run_id).status_code == 409


@watches_the_app_in_process
def test_a_cancel_that_the_run_outlives_by_finishing_before_its_flag_is_a_409(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run finishes after the cancel request read it running but before its flag is written: the flag is not
    written on a finished run, the orchestration is gone and refuses the event, and the caller is told the run
    finished (409), not a server error. The run keeps its answer and its `completed`."""
    model.set_script(Script.of("The answer."))
    model.hold_answers()
    started = app.start(input="A question")
    run_id = started["run_id"]
    model.log.wait_for(1, timeout=PROGRESS_TIMEOUT_S)
    run_status = app.app_module("agent_runs.run_status")
    flag = run_status.flag_cancel

    async def after_the_run_ended(store: Any, run: Any, now: Any, **kwargs: Any) -> Any:
        model.release_answers()
        # Until the run is closed in the store, not until its orchestration completes: the cancel event, were it
        # raised, could still be taken by the orchestration in between (it answered 202 to a completed run then).
        for _ in range(int(PROGRESS_TIMEOUT_S / 0.02)):
            if (await store.get_run(run.run_id)).finished:
                break
            await asyncio.sleep(0.02)
        return await flag(store, run, now, **kwargs)

    monkeypatch.setattr(run_status, "flag_cancel", after_the_run_ended)
    late = app.cancel(run_id)
    monkeypatch.undo()

    assert (late.status_code, late.json()["code"]) == (409, "run_finished"), late.text
    view = app.view(run_id)
    assert (view["status"], view["output"]["text"]) == ("completed", "The answer.")
    assert app.cancel(run_id).status_code == 409


@watches_the_app_in_process
@pytest.mark.parametrize("cancels", [1, 2], ids=["once", "twice"])
def test_a_cancel_before_the_orchestration_started_is_accepted_and_cancels_the_run(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, cancels: int
) -> None:
    """The cancel comes when the run's record exists but its orchestration does not yet (the start request is
    between the two; the host answers the cancel event with a 404). The cancel stored is the cancel: it is accepted
    (202, not a server error), and the run's first step reads it, so the model is never asked."""
    model.set_script(Script.of("Next run's answer."))
    gateway = app.app_module("http_api.durable_gateway").DurableGateway
    start_run = gateway.start_run
    answers: list[httpx.Response] = []

    async def cancel_first(self: Any, run_input: Any) -> None:
        async with httpx.AsyncClient(base_url=app.host.base_url, trust_env=False) as client:
            for _ in range(cancels):
                answers.append(await client.post(f"/api/runs/{run_input.run.run_id}/cancel"))
        await start_run(self, run_input)

    monkeypatch.setattr(gateway, "start_run", cancel_first)
    started = app.start(input="A question")
    monkeypatch.undo()

    assert len(answers) == cancels
    for answer in answers:  # a cancel sent again (a lost answer) before the start is the same cancel
        assert (answer.status_code, answer.json()["status"]) == (202, "cancelling"), answer.text
    app.settle()
    assert app.view(started["run_id"])["status"] == "cancelled"
    assert model.log.requests == []
    nxt = app.start(input="Anything else?", session_id=started["session_id"])  # the session was released
    app.settle()
    assert app.view(nxt["run_id"])["status"] == "completed"
