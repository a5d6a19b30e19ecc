"""The store down for longer than an activity's own retries (three, seconds apart) where a run must not give up:
its steps (`orchestrators.agent_run._step`: a model call, a tool batch, an approval step), its close
(`orchestrators.agent_run._close`) and its wait in its session's queue (`orchestrators.queue_wait`). The run waits on
durable timers and tries again (about an hour in all), so once the store is back it goes on and ends as it would
have, its session free - with no client polling it. Before, a step's failure failed the run (a rewind could take it
on), and a close's crashed its orchestration with the record open and the session held until a poll of the run closed
it `run_crashed` (a workflow's child or a run whose client left may never be polled). A failure that is not an outage
(a bug) fails alike every time and is not tried again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from e2e_harness import InProcessApp, completed_activities, parallel_calls, pending_ids
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


def decided_while_the_store_is_down(
    app: InProcessApp, model: ScriptedModelServer, minutes: int, *down: str,
    failure: Callable[[], Exception] = outage,
) -> tuple[dict[str, Any], list[str]]:
    """A run waiting for its approval (an email) is approved; the store's `down` calls are refused from then on, for
    `minutes` of durable time, while the run applies the decision, runs the tool and calls the model."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL), "Sent."))
    view = app.start_until_approval(input="Email Bob")
    (approval_id,) = pending_ids(view)
    with store_down(app.services().current().store, *down, failure=failure) as refused:
        assert app.decide(view["run_id"], approval_id, "approve").status_code == 202
        app.settle()
        for _ in range(minutes):
            app.advance(60)
        status = runtime_status(app, view["run_id"])
    return {**view, "runtime_status_in_outage": status}, refused


def assert_ended_as_without_the_outage(app: InProcessApp, view: dict[str, Any]) -> None:
    assert until_ended(app, view["run_id"]) == "Completed"
    ended = app.view(view["run_id"])
    assert (ended["status"], ended["output"]["text"]) == ("completed", "Sent."), ended
    assert app.effects(view["session_id"], "email") == [EMAIL]  # the tool ran, once
    session = app.store_call(lambda s: s.get_session(view["session_id"]))
    assert session is not None and session.active_run_id is None


@pytest.mark.parametrize("down", ["append_to_open_run", "record_effect"])
def test_a_run_whose_store_is_down_for_its_next_steps_goes_on_once_the_store_is_back(
    app: InProcessApp, model: ScriptedModelServer, down: str
) -> None:
    """For ten minutes its messages cannot be written (the decision's, the tool's, the model's: the approval step
    waits the outage out), or the email's exactly-once ledger, which is the store, is down (the tool batch waits it
    out: `EffectLedgerUnavailableError` passes the outage on). The run goes on once the store is back and ends as it
    would have (before: it failed), the email sent once."""
    view, refused = decided_while_the_store_is_down(app, model, 10, down)
    assert view["runtime_status_in_outage"] == "Running" and refused.count(down) > 6, refused
    assert_ended_as_without_the_outage(app, view)


def test_a_run_cancelled_while_a_step_waits_out_an_outage_ends_cancelled_at_once(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The wait between tries races cancel, as every wait of a run does: the cancel does not wait for the store."""
    view, _ = decided_while_the_store_is_down(app, model, 2, "append_to_open_run")
    assert view["runtime_status_in_outage"] == "Running"
    assert app.cancel(view["run_id"]).status_code == 202
    app.settle()  # no durable time passes
    assert runtime_status(app, view["run_id"]) == "Completed"
    assert app.view(view["run_id"])["status"] == "cancelled"
    assert app.effects(view["session_id"], "email") == []  # the decision was never applied: the tool never ran


def test_a_step_whose_store_stays_down_for_hours_fails_the_run_after_about_an_hour(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    view, refused = decided_while_the_store_is_down(app, model, 300, "append_to_open_run")
    assert refused.count("append_to_open_run") == 3 * (len(OUTAGE_RETRIES) + 1)
    assert runtime_status(app, view["run_id"]) == "Completed"
    failed = app.view(view["run_id"])
    assert (failed["status"], failed["error"]["code"]) == ("failed", "approval_step_failed"), failed


def test_a_step_that_fails_with_a_bug_fails_the_run_after_the_activitys_own_retries(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    view, refused = decided_while_the_store_is_down(app, model, 3, "append_to_open_run", failure=bug)
    assert refused.count("append_to_open_run") == 3
    failed = app.view(view["run_id"])
    assert (failed["status"], failed["error"]["code"]) == ("failed", "approval_step_failed"), failed


def test_a_run_started_before_steps_waited_out_outages_fails_there_as_it_did(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its history has the run's close right after the failed step, not a timer: it must replay as it ran."""
    runs = app.app_module("http_api.runs")
    started_with = runs.run_input_for
    monkeypatch.setattr(runs, "run_input_for", lambda *args, **kwargs: started_with(*args, **kwargs).model_copy(
        update={"steps_wait_out_outages": False}))
    view, refused = decided_while_the_store_is_down(app, model, 3, "append_to_open_run")
    assert refused.count("append_to_open_run") == 3
    assert app.view(view["run_id"])["status"] == "failed"


def test_a_rewind_of_a_run_started_before_steps_waited_out_outages_waits_them_out(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run from before failed its model call in an outage; its rewind starts a fresh history, which waits the next
    outage out and ends as it would have."""
    runs = app.app_module("http_api.runs")
    started_with = runs.run_input_for
    monkeypatch.setattr(runs, "run_input_for", lambda *args, **kwargs: started_with(*args, **kwargs).model_copy(
        update={"steps_wait_out_outages": False}))
    model.set_script(Script(turns=[Reply.call("send_email", EMAIL)], default=Reply(text="Sent.")))
    view = app.start_until_approval(input="Email Bob")
    (approval_id,) = pending_ids(view)
    store = app.services().current().store
    answers = lambda session_id, run_id, records: any(record.role == "assistant" for record in records)  # noqa: E731
    with store_down(store, "append_to_open_run", when=answers):
        assert app.decide(view["run_id"], approval_id, "approve").status_code == 202
        app.settle()
        for _ in range(3):
            app.advance(60)
        assert app.view(view["run_id"])["error"]["code"] == "model_call_failed"
        rewound = app.http.post(f"/api/runs/{view['run_id']}/rewind")
        assert rewound.status_code == 202, rewound.text
        for _ in range(5):  # the store still down for the rewound call: it waits
            app.advance(60)
        assert runtime_status(app, view["run_id"]) == "Running"
    assert '"steps_wait_out_outages": true' in app.history(view["run_id"])["input"]
    assert_ended_as_without_the_outage(app, view)


def test_a_model_call_whose_answer_cannot_be_stored_is_asked_again_once_the_store_is_back(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """Only the model's answers cannot be written for ten minutes: the model call is tried again after each wait (the
    model asked again: its answer was never stored), and the run ends with the answer it got once it could be."""
    model.set_script(Script(turns=[Reply.call("send_email", EMAIL)], default=Reply(text="Sent.")))
    view = app.start_until_approval(input="Email Bob")
    asked = model.log.total
    (approval_id,) = pending_ids(view)
    answers = lambda session_id, run_id, records: any(record.role == "assistant" for record in records)  # noqa: E731
    with store_down(app.services().current().store, "append_to_open_run", when=answers) as refused:
        assert app.decide(view["run_id"], approval_id, "approve").status_code == 202
        app.settle()
        for _ in range(10):
            app.advance(60)
        assert runtime_status(app, view["run_id"]) == "Running" and len(refused) > 6, refused
    assert_ended_as_without_the_outage(app, view)
    assert model.log.total - asked == len(refused) + 1


def test_a_tool_batch_tries_again_only_the_call_that_failed_in_an_outage(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """Two emails in one batch; the ledger is down for the second only. The first call's activity is not scheduled
    again (its result is kept); the second's is, until the store is back: both sent once."""
    first, second = EMAIL, {**EMAIL, "to": "carol@example.com"}
    model.set_script(Script.of(parallel_calls("send_email", first, second), "Sent."))
    view = app.start_until_approval(input="Email Bob and Carol")
    store = app.services().current().store
    recorded: list[str] = []
    record_effect = store.record_effect

    async def counted(session_id: str, key: str, kind: str, payload: dict[str, Any]) -> Any:
        recorded.append(payload["to"])
        return await record_effect(session_id, key, kind, payload)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "record_effect", counted)
        to_carol = lambda session_id, key, kind, payload: payload["to"] == second["to"]  # noqa: E731
        with store_down(store, "record_effect", when=to_carol) as refused:
            for approval_id in pending_ids(view):
                assert app.decide(view["run_id"], approval_id, "approve").status_code == 202
            app.settle()
            for _ in range(10):
                app.advance(60)
            assert runtime_status(app, view["run_id"]) == "Running" and len(refused) > 6, refused
        assert until_ended(app, view["run_id"]) == "Completed"
    assert recorded == [first["to"], second["to"]]  # each reached the ledger once: Carol's once it was back
    assert completed_activities(app.history(view["run_id"])).count("invoke_tool") == 2  # Bob's call not again
    assert sorted(app.effects(view["session_id"], "email"), key=lambda email: email["to"]) == [first, second]
    assert app.view(view["run_id"])["output"]["text"] == "Sent."


def test_decisions_that_arrive_while_a_step_waits_out_an_outage_are_all_applied_once_it_is_back(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """Two emails wait for approval. The first decision's step cannot write (the store down for the run's messages);
    while the run waits between tries, the second decision arrives, and the first is sent again (a client after a
    lost answer). Once the store is back both are applied, once each, and both emails are sent once."""
    first, second = EMAIL, {**EMAIL, "to": "carol@example.com"}
    model.set_script(Script.of(parallel_calls("send_email", first, second), "Sent."))
    view = app.start_until_approval(input="Email Bob and Carol")
    bob, carol = pending_ids(view)
    with store_down(app.services().current().store, "append_to_open_run") as refused:
        assert app.decide(view["run_id"], bob, "approve").status_code == 202
        app.settle()
        app.advance(60)  # the step's own tries failed: the run waits on a timer
        assert app.decide(view["run_id"], carol, "approve").status_code == 202  # early for the step, during its wait
        assert app.decide(view["run_id"], bob, "approve").status_code == 202  # twice
        for _ in range(5):
            app.advance(60)
        assert runtime_status(app, view["run_id"]) == "Running" and len(refused) > 6, refused
    assert until_ended(app, view["run_id"]) == "Completed"
    ended = app.view(view["run_id"])
    assert (ended["status"], ended["output"]["text"]) == ("completed", "Sent."), ended
    assert sorted(app.effects(view["session_id"], "email"), key=lambda email: email["to"]) == [first, second]
    assert [a["status"] for a in app.approvals(view["run_id"])] == ["approved", "approved"]


@pytest.fixture
def store_backend() -> str:
    return "sqlite"  # the outage is the store object's, whichever store it is
