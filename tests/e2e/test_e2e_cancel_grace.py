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
from e2e_harness import PROGRESS_TIMEOUT_S, InProcessApp, contents_of, unanswered_tool_calls, wait_for_file
from e2e_settings import watches_the_app_in_process

from scripted_model import Reply, Script, ScriptedModelServer

GRACE_SECONDS = 30  # the default of CANCEL_GRACE_SECONDS


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
