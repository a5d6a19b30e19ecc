"""A run whose store is down when it closes, for longer than the close activity's own retries (three, seconds
apart): the run waits on durable timers and tries again (`orchestrators.agent_run._close`, about an hour in all),
so once the store is back the run ends as it would have, its session free - with no client polling it. Before, its
orchestration crashed with the record open and the session held until a poll of the run closed it `run_crashed`;
a workflow's child or a run whose client left may never be polled."""

from __future__ import annotations

from typing import Any

import pytest
from e2e_harness import InProcessApp
from e2e_settings import watches_the_app_in_process
from store_outage import store_down

from durable_steps import OUTAGE_RETRIES
from scripted_model import Reply, Script, ScriptedModelServer

pytestmark = watches_the_app_in_process  # the outage replaces the app's own store methods


EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello"}


def runtime_status(app: InProcessApp, run_id: str) -> str:
    return app.host.run(app.host.engine.get_status(run_id)).runtime_status.value


def cancelled_while_the_store_is_down(app: InProcessApp, minutes: int) -> tuple[dict[str, Any], list[str]]:
    """A run waiting for an approval is cancelled (flagged: that write goes through), then its close is refused for
    `minutes` of durable time."""
    view = app.start_until_approval(input="Email Bob")
    with store_down(app.services().current().store, "finish_run") as refused:
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


@pytest.fixture
def store_backend() -> str:
    return "sqlite"  # the outage is the store object's, whichever store it is
