"""The store down for longer than an activity's own retries (three, seconds apart) where a run must not give up:
its close (`orchestrators.agent_run._close`) and its wait in its session's queue (`orchestrators.queue_wait`). The run
waits on durable timers and tries again (about an hour in all), so once the store is back it ends as it would have,
its session free - with no client polling it. Before, its orchestration crashed with the record open and the session
held until a poll of the run closed it `run_crashed`; a workflow's child or a run whose client left may never be
polled."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from e2e_harness import InProcessApp
from e2e_settings import watches_the_app_in_process
from store_outage import bug, outage, store_down

from durable_steps import OUTAGE_RETRIES
from scripted_model import Reply, Script, ScriptedModelServer

pytestmark = watches_the_app_in_process  # the outage replaces the app's own store methods


EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello"}


def runtime_status(app: InProcessApp, run_id: str) -> str:
    return app.host.run(app.host.engine.get_status(run_id)).runtime_status.value


def cancelled_while_the_store_is_down(
    app: InProcessApp, minutes: int, failure: Callable[[], Exception] = outage
) -> tuple[dict[str, Any], list[str]]:
    """A run waiting for an approval is cancelled (flagged: that write goes through), then its close is refused for
    `minutes` of durable time."""
    view = app.start_until_approval(input="Email Bob")
    with store_down(app.services().current().store, "finish_run", failure=failure) as refused:
        assert app.cancel(view["run_id"]).status_code == 202
        app.settle()
        for _ in range(minutes):
            app.advance(60)
        status = runtime_status(app, view["run_id"])
    return {**view, "runtime_status_in_outage": status}, refused


def until_ended(app: InProcessApp, run_id: str) -> str:
    for _ in range(300):  # each try's retries (2 s apart) and each wait between tries come due a minute at a time
        status = runtime_status(app, run_id)
        if status != "Running":
            return status
        app.advance(60)
    raise AssertionError(f"run {run_id} still running")


def test_a_run_whose_store_is_down_at_its_close_ends_once_the_store_is_back(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Sent."))
    view, refused = cancelled_while_the_store_is_down(app, minutes=10)
    assert view["runtime_status_in_outage"] == "Running" and len(refused) > 6  # waiting between tries, not crashed
    assert until_ended(app, view["run_id"]) == "Completed"
    run = app.store_call(lambda s: s.get_run(view["run_id"]))
    session = app.store_call(lambda s: s.get_session(view["session_id"]))
    assert run is not None and session is not None
    assert (run.status, session.active_run_id) == ("cancelled", None), run
    assert app.effects(view["session_id"], "email") == []
    assert app.view(view["run_id"])["status"] == "cancelled"


def test_a_store_down_for_hours_at_the_close_still_ends_the_orchestration(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The run gives up after about an hour: its orchestration fails as before, and a poll of the run closes it
    (flagged: it ends cancelled)."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Sent."))
    view, refused = cancelled_while_the_store_is_down(app, minutes=300)
    assert view["runtime_status_in_outage"] == "Failed"
    assert refused.count("finish_run") == 3 * (len(OUTAGE_RETRIES) + 1)
    assert app.view(view["run_id"])["status"] == "cancelled"
    session = app.store_call(lambda s: s.get_session(view["session_id"]))
    assert session is not None and session.active_run_id is None


def test_a_close_that_fails_with_a_bug_ends_the_orchestration_after_the_activitys_own_retries(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """Not an outage (the failure names no `StoreUnavailableError`): a try an hour long would fail alike. The
    orchestration fails within minutes, after the activity's own three tries, and a poll closes the run."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Sent."))
    view, refused = cancelled_while_the_store_is_down(app, minutes=3, failure=bug)
    assert view["runtime_status_in_outage"] == "Failed"
    assert refused.count("finish_run") == 3
    assert app.view(view["run_id"])["status"] == "cancelled"


def test_a_run_queued_for_its_session_waits_out_an_outage_and_runs_when_the_session_is_free(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """A run queued behind another (`if_busy: enqueue`) asks the store on a timer whether the session is its own:
    the store down for thirty minutes is waited out, and the run runs once the run before it ends (before: its
    orchestration crashed, and the session, handed to it all the same, stayed held by a run that never ran)."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Second done."))
    first = app.start_until_approval(input="Email Bob")
    queued = app.start(input="second", session_id=first["session_id"], if_busy="enqueue")
    assert queued["status"] == "queued"
    app.settle()
    with store_down(app.services().current().store) as refused:
        for _ in range(30):
            app.advance(60)
        assert runtime_status(app, queued["run_id"]) == "Running" and refused  # still asking, on its timer
    assert app.cancel(first["run_id"]).status_code == 202
    app.settle()
    assert until_ended(app, queued["run_id"]) == "Completed"
    run = app.store_call(lambda s: s.get_run(queued["run_id"]))
    session = app.store_call(lambda s: s.get_session(first["session_id"]))
    assert run is not None and session is not None
    assert (run.status, session.active_run_id) == ("completed", None), run
    assert app.view(queued["run_id"])["output"]["text"] == "Second done."


def test_a_queued_run_whose_turn_fails_with_a_bug_ends_at_once_and_a_poll_closes_it(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """`take_turn` failing alike every time (a bug, not an outage) is not asked again on a timer for an hour: the
    queued run's orchestration fails, and a poll of it closes it (its session's queue moves on)."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL)))
    first = app.start_until_approval(input="Email Bob")
    queued = app.start(input="second", session_id=first["session_id"], if_busy="enqueue")
    app.settle()
    with store_down(app.services().current().store, "take_turn", failure=bug) as refused:
        for _ in range(3):  # its own retries come due a minute at a time
            app.advance(60)
        assert runtime_status(app, queued["run_id"]) == "Failed"
    assert refused.count("take_turn") == 3
    assert app.view(queued["run_id"])["status"] == "failed"


@pytest.fixture
def store_backend() -> str:
    return "sqlite"  # the outage is the store object's, whichever store it is
