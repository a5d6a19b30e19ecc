"""Cancel with a hung step: the run waits `CANCEL_GRACE_SECONDS` (a durable timer, on devhost's virtual clock) for
the step in flight, then abandons it. The run still ends `cancelled`, every call has a result, the session is free,
and the abandoned tool's late result is not written into the closed run. No sleeps: the grace timer fires when the
test moves the virtual clock."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import (
    PROGRESS_TIMEOUT_S,
    InProcessApp,
    contents_of,
    parallel_calls,
    pending_ids,
    unanswered_tool_calls,
    wait_for_file,
)
from e2e_settings import watches_the_app_in_process
from step_pause import paused

from scripted_model import Reply, Script, ScriptedModelServer

GRACE_SECONDS = 30  # the default of CANCEL_GRACE_SECONDS
EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello"}


def _wait_for_history_event(app: InProcessApp, run_id: str, event_type: str) -> None:
    """Block until the orchestration recorded `event_type` (the engine offers no event for it); bounded."""
    deadline = time.monotonic() + PROGRESS_TIMEOUT_S
    while not any(e["EventType"] == event_type for e in app.history(run_id)["historyEvents"]):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {event_type} in the history of {run_id}")
        time.sleep(0.02)


def _advance_clock(app: InProcessApp, seconds: float) -> None:
    """Move the virtual clock without waiting for idle (the hung tool keeps the host busy)."""

    async def advance() -> Any:
        return app.host.clock.advance(seconds)

    app.host.run(advance())


def test_cancel_abandons_a_hung_tool_after_the_grace_period(
    app: InProcessApp, model: ScriptedModelServer, marker_dir: Path
) -> None:
    model.set_script(Script.of(Reply.call("slow_step", {"label": "hang"}), "Next run's answer."))
    started = app.start(input="Do the slow step")
    run_id = started["run_id"]
    wait_for_file(marker_dir / "slow_step.started")  # the tool runs and will not return until released

    assert app.cancel(run_id).status_code == 202
    _wait_for_history_event(app, run_id, "TimerCreated")  # the run took the cancel and waits for the tool
    _advance_clock(app, GRACE_SECONDS - 1)
    assert app.view(run_id)["status"] == "in_progress"  # still within the grace period
    _advance_clock(app, 2)
    # The run closes now; its orchestration instance ends when the abandoned activity returns (Durable does not
    # complete an orchestration with an activity outstanding), which does not hold anything up.
    app.wait_for(run_id, {"cancelled"})

    view = app.view(run_id)
    assert (view["status"], view["error"]["code"]) == ("cancelled", "cancelled")
    messages = app.session_messages(started["session_id"])
    assert [contents_of(m) for m in messages] == [["text"], ["function_call"], ["function_result"]]
    assert "Not run" in messages[-1]["contents"][0]["error"]

    (marker_dir / "slow_step.release").touch()  # the abandoned tool returns now
    app.settle()
    late = app.session_messages(started["session_id"])
    assert late == messages  # its result was dropped: the closed run is unchanged
    assert app.history(run_id)["runtimeStatus"] == "Completed"

    nxt = app.start(input="Anything else?", session_id=started["session_id"])  # the session is free
    app.settle()
    assert app.view(nxt["run_id"])["output"]["text"] == "Next run's answer."


def test_cancel_abandons_a_hung_model_call_and_its_late_answer_is_dropped(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The same with the model call hung: its answer, arriving after the run closed, is not written into the closed
    run (a call in it would have no result, and the session's next model call would be refused by the provider)."""
    model.set_script(Script.of(Reply.call("lookup", {"key": "k1"}), "Next run's answer."))
    model.hold_answers()
    started = app.start(input="Look up k1")
    run_id = started["run_id"]
    model.log.wait_for(1, timeout=PROGRESS_TIMEOUT_S)  # the call is in flight

    assert app.cancel(run_id).status_code == 202
    _wait_for_history_event(app, run_id, "TimerCreated")
    _advance_clock(app, GRACE_SECONDS + 1)
    app.wait_for(run_id, {"cancelled"})
    messages = app.session_messages(started["session_id"])
    assert [contents_of(m) for m in messages] == [["text"]]

    model.release_answers()  # the abandoned call gets its answer now
    app.settle()
    assert app.session_messages(started["session_id"]) == messages  # the closed run is unchanged

    nxt = app.start(input="Anything else?", session_id=started["session_id"])
    app.settle()
    assert app.view(nxt["run_id"])["output"]["text"] == "Next run's answer."
    assert unanswered_tool_calls(model.log.last.messages) == []


@watches_the_app_in_process
def test_cancel_abandons_a_hung_approval_step_and_leaves_no_approval_pending(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step recording approval requests hangs (a throttled store) past the grace period: the run closes
    `cancelled`, expiring what was pending then. The requests the abandoned step stores afterwards must not stay
    pending in the closed run (an inbox would offer them; deciding one is refused)."""
    model.set_script(Script.of(Reply.call("send_email", {"to": "bob@example.com", "subject": "Hi", "body": "Hi"})))
    approvals = app.app_module("activities.approvals")
    record_requests = approvals.record_approval_requests_step
    held, release = threading.Event(), threading.Event()

    async def hung(*args: Any, **kwargs: Any) -> Any:
        recorded = await record_requests(*args, **kwargs)
        held.set()
        while not release.is_set():
            await asyncio.sleep(0.02)  # released by the test thread: there is no event on this loop to wait on
        return recorded

    monkeypatch.setattr(approvals, "record_approval_requests_step", hung)
    started = app.start(input="Email Bob")
    run_id = started["run_id"]
    assert held.wait(PROGRESS_TIMEOUT_S)
    assert app.cancel(run_id).status_code == 202
    _wait_for_history_event(app, run_id, "TimerCreated")
    _advance_clock(app, GRACE_SECONDS + 1)
    app.wait_for(run_id, {"cancelled"})
    release.set()  # the abandoned step stores its approval records now
    app.settle()

    assert app.view(run_id)["status"] == "cancelled"
    assert [a["status"] for a in app.approvals(run_id)] == ["expired"]
    inbox = app.http.get("/api/approvals", params={"status": "pending"})
    assert inbox.status_code == 200 and inbox.json()["approvals"] == [], inbox.text
    assert app.effects(started["session_id"]) == []


def _cancel_past_the_grace_period(app: InProcessApp, run_id: str) -> list[dict[str, Any]]:
    """Cancel while a step is held in flight, let the grace period run out: the run closes `cancelled` with the step
    abandoned. Returns the session's messages as the close left them."""
    assert app.cancel(run_id).status_code == 202
    _wait_for_history_event(app, run_id, "TimerCreated")
    _advance_clock(app, GRACE_SECONDS + 1)
    app.wait_for(run_id, {"cancelled"})
    return app.session_messages(app.view(run_id)["session_id"])


def _assert_the_next_run_works(app: InProcessApp, model: ScriptedModelServer, session_id: str) -> None:
    nxt = app.start(input="Anything else?", session_id=session_id)
    app.settle()
    assert app.view(nxt["run_id"])["output"]["text"] == "Next run's answer."
    assert unanswered_tool_calls(model.log.last.messages) == []


def _assert_the_closed_run_stands(
    app: InProcessApp, model: ScriptedModelServer, run_id: str, session_id: str, closed: list[dict[str, Any]]
) -> None:
    """Once the abandoned step went on: the closed run is exactly as the close left it, its orchestration completed,
    and the session's next run works."""
    app.settle()
    assert app.session_messages(session_id) == closed
    assert app.history(run_id)["runtimeStatus"] == "Completed"
    _assert_the_next_run_works(app, model, session_id)


def test_an_abandoned_decision_step_writes_nothing_into_the_closed_run(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """`apply_decisions` hangs (a throttled store) after reading the stored decision, past the cancel's grace period:
    the run closes `cancelled`, answering the approved call with "not run". The approval response the abandoned step
    writes afterwards must not land in the closed run (a decision appended after the run's end, for a call the close
    already answered)."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Next run's answer."))
    view = app.start_until_approval(input="Email Bob")
    run_id, session_id = view["run_id"], view["session_id"]
    (approval_id,) = pending_ids(view)
    with paused(app, "list_approvals", equal={"run_id": run_id}, absent=("status",)) as applying:
        assert app.decide(run_id, approval_id, "approve").status_code == 202
        applying.wait_reached()  # the step read the decision and is about to write it into the conversation
        closed = _cancel_past_the_grace_period(app, run_id)
        assert [contents_of(m) for m in closed] == [
            ["text"],
            ["function_call"],
            ["function_approval_request"],
            ["function_result"],
        ]
    _assert_the_closed_run_stands(app, model, run_id, session_id, closed)  # the abandoned step goes on first
    assert app.view(run_id)["status"] == "cancelled"
    assert [a["status"] for a in app.approvals(run_id)] == ["approved"]  # the decision stands in the audit trail
    assert app.effects(session_id) == []  # the approved email was never sent


def test_an_abandoned_expiry_step_writes_nothing_into_the_closed_run(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """`expire_approvals` hangs after expiring the first of two approvals, past the cancel's grace period: the run
    closes `cancelled` (expiring the second). The abandoned step then writes no expiry into the closed run: neither
    for the approval it expired itself nor for the one the close expired."""
    model.set_script(
        Script.of(parallel_calls("send_email", EMAIL, {**EMAIL, "to": "eve@example.com"}), "Next run's answer.")
    )
    view = app.start_until_approval(input="Email Bob and Eve")
    run_id, session_id = view["run_id"], view["session_id"]
    first, second = pending_ids(view)
    with paused(app, "decide_approval", equal={"status": "expired", "reason": "Not approved in time."}) as expiry:
        _advance_clock(app, 2 * 86400)  # the deadline passes: the expiry step starts
        expiry.wait_reached()  # it expired the first approval in the store and is held there
        closed = _cancel_past_the_grace_period(app, run_id)
        assert [contents_of(m) for m in closed] == [
            ["text"],
            ["function_call", "function_call"],
            ["function_approval_request"],
            ["function_approval_request"],
            ["function_result"],
            ["function_result"],
        ]
    _assert_the_closed_run_stands(app, model, run_id, session_id, closed)  # the abandoned step goes on first
    records = {a["approval_id"]: a for a in app.approvals(run_id)}
    assert {a: r["status"] for a, r in records.items()} == {first: "expired", second: "expired"}
    assert records[second]["reason"] == "The run ended (cancelled)."  # the close expired it, not the late step
    assert app.effects(session_id) == []


@watches_the_app_in_process
def test_an_abandoned_request_step_writes_nothing_into_the_closed_run(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`record_approvals` hangs before writing its requests, past the cancel's grace period: the run closes
    `cancelled`, answering the call with "not run". The requests the abandoned step would write afterwards must not
    land in the closed run, nor its approvals in the store."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Next run's answer."))
    approvals = app.app_module("activities.approvals")
    record_requests = approvals.record_approval_requests_step
    held, release = threading.Event(), threading.Event()

    async def hung(*args: Any, **kwargs: Any) -> Any:
        held.set()
        while not release.is_set():
            await asyncio.sleep(0.02)  # released by the test thread: there is no event on this loop to wait on
        return await record_requests(*args, **kwargs)

    monkeypatch.setattr(approvals, "record_approval_requests_step", hung)
    started = app.start(input="Email Bob")
    run_id, session_id = started["run_id"], started["session_id"]
    try:
        assert held.wait(PROGRESS_TIMEOUT_S)
        closed = _cancel_past_the_grace_period(app, run_id)
        assert [contents_of(m) for m in closed] == [["text"], ["function_call"], ["function_result"]]
    finally:
        release.set()  # the abandoned step goes on now (also when an assertion above failed: no step spins forever)
    _assert_the_closed_run_stands(app, model, run_id, session_id, closed)
    assert app.approvals(run_id) == []  # nothing to decide in a closed run: no approval stored
    inbox = app.http.get("/api/approvals", params={"status": "pending"})
    assert inbox.status_code == 200 and inbox.json()["approvals"] == [], inbox.text
