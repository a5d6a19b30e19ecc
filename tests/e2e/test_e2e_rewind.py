"""Rewind: a failed run goes on from the step that failed, as the same run, on both stores.

The model endpoint fails for good after a tool with a side effect ran; once it is back, a rewind completes the run:
the tool is not run again (its effect stays applied once), the model call that succeeded is not made again, the
conversation has each result once, and the run's continuation token still works.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from e2e_harness import InProcessApp
from e2e_settings import watches_the_app_in_process
from event_outage import events_refused
from fixture_agents.store_pause import pause_dir
from httpx_sse import connect_sse
from killed_store import KilledAfterOneWrite
from step_pause import paused
from webhook_receiver import SECRET, WebhookReceiver

from scripted_model import Fault, Match, Reply, Rule, Script, ScriptedModelServer

FAILING_AFTER_THE_TOOL = Script(rules=[
    Rule(match=Match(last_tool_name="slow_step"), reply=Reply.fail(Fault(status=500, message="model down"))),
    Rule(match=Match(last_user="."), reply=Reply.call("slow_step", {"label": "invoice-7"})),
])
INTERRUPTED = {"rewind_id": "interrupted", "by": "anonymous", "at": "2026-11-25T00:00:00Z",
               "from_step": "call_model", "iteration": 1}  # what a rewind whose host died after the reopen stored
RECOVERED = Script(rules=[
    Rule(match=Match(last_tool_name="slow_step"), reply=Reply.say("Invoice 7 is filed.")),
    Rule(match=Match(last_user="."), reply=Reply.call("slow_step", {"label": "invoice-8"})),
])


@pytest.fixture
def rewind_app(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], marker_dir: Path
) -> Iterator[InProcessApp]:
    (marker_dir / "slow_step.release").touch()  # the tool returns at once
    with app_with(MODEL_RETRY_MAX_ATTEMPTS="1") as app:
        yield app


def until_the_model_calls_give_up(app: InProcessApp) -> None:
    """The run (or its continuation) settled, and Durable's retries of a failing model call (after 2 s, then 4 s)
    failed too."""
    app.settle()
    for _ in range(3):
        app.advance(60)


def failed_run(app: InProcessApp, model: ScriptedModelServer) -> dict:
    model.set_script(FAILING_AFTER_THE_TOOL)
    started = app.start(input="File invoice 7.")
    until_the_model_calls_give_up(app)
    view = app.view(started["run_id"])
    assert view["status"] == "failed" and view["error"]["code"] == "model_call_failed", view
    return started


def failed_run_to_recover(app: InProcessApp, model: ScriptedModelServer) -> tuple[dict, int]:
    """A failed run whose model endpoint is back, and the model calls made so far."""
    started = failed_run(app, model)
    model.set_script(RECOVERED)
    return started, model.log.total


def assert_session_free(app: InProcessApp, session_id: str, text: str = "Next.") -> None:
    """The session is free again: the conversation goes on in it."""
    follow_up = app.start(input=text, session_id=session_id)
    app.settle()
    assert app.view(follow_up["run_id"])["status"] == "completed"


def tool_attempts(marker_dir: Path) -> int:
    started = marker_dir / "slow_step.started"
    return len(started.read_text().splitlines()) if started.exists() else 0


def test_a_rewound_run_goes_on_from_the_failed_model_call_and_runs_nothing_twice(
    rewind_app: InProcessApp, model: ScriptedModelServer, marker_dir: Path
) -> None:
    app = rewind_app
    started = failed_run(app, model)
    run_id = started["run_id"]
    assert tool_attempts(marker_dir) == 1
    model_calls_before = model.log.total

    model.set_script(RECOVERED)  # the endpoint is back
    rewound = app.http.post(f"/api/runs/{run_id}/rewind")
    assert rewound.status_code == 202, rewound.text
    body = rewound.json()
    assert body["run_id"] == run_id and body["status"] == "in_progress"
    assert body["rewind"]["from_step"] == "call_model" and body["rewind"]["by"] == "anonymous"
    assert body["rewind"]["error_code"] == "model_call_failed"
    assert rewound.headers["Location"].endswith(f"/api/runs/{run_id}")
    app.settle()

    done = app.poll(run_id, token=started["continuation_token"]).json()  # the first token still works
    assert done["status"] == "completed" and done["output"]["text"] == "Invoice 7 is filed."
    assert tool_attempts(marker_dir) == 1  # the tool was not run again
    assert len(app.effects(started["session_id"], kind="slow_step")) == 1
    assert model.log.total == model_calls_before + 1  # only the failed model call was made again
    roles = [m["role"] for m in app.session_messages(started["session_id"])]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert [r["from_step"] for r in done["rewinds"]] == ["call_model"]  # the run shows its rewinds

    assert_session_free(app, started["session_id"], "And invoice 8.")


def test_only_a_failed_run_that_is_its_sessions_latest_can_be_rewound(
    rewind_app: InProcessApp, model: ScriptedModelServer
) -> None:
    app = rewind_app
    started = failed_run(app, model)
    model.set_script(RECOVERED)
    later = app.start(input="Another one.", session_id=started["session_id"])
    app.settle()
    assert app.view(later["run_id"])["status"] == "completed"

    not_latest = app.http.post(f"/api/runs/{started['run_id']}/rewind")
    assert not_latest.status_code == 409
    assert not_latest.json()["code"] == "run_not_latest" and "fork" in not_latest.json()["detail"].lower()
    completed = app.http.post(f"/api/runs/{later['run_id']}/rewind")
    assert completed.status_code == 409 and completed.json()["code"] == "run_not_failed"
    assert app.http.post("/api/runs/nosuchrun/rewind").status_code == 404


def test_two_rewinds_at_once_start_one_continuation(
    rewind_app: InProcessApp, model: ScriptedModelServer, marker_dir: Path
) -> None:
    app = rewind_app
    started, calls_before = failed_run_to_recover(app, model)

    async def both() -> list[int]:
        import httpx

        async with httpx.AsyncClient(base_url=app.host.base_url, timeout=30) as client:
            answers = await asyncio.gather(*(client.post(f"/api/runs/{started['run_id']}/rewind") for _ in range(2)))
        return sorted(a.status_code for a in answers)

    assert asyncio.run(both()) == [202, 409]
    app.settle()
    assert app.view(started["run_id"])["status"] == "completed"
    assert model.log.total == calls_before + 1
    assert tool_attempts(marker_dir) == 1
    run = app.store_call(lambda store: store.get_run(started["run_id"]))
    assert len(run.rewinds) == 1


def test_a_rewind_interrupted_between_reopening_and_starting_is_completed_by_the_next(
    rewind_app: InProcessApp, model: ScriptedModelServer
) -> None:
    """What a host kill between the store's reopen and the orchestration's start leaves behind: the run open, its
    orchestration the finished failed one. Sending the rewind again starts the continuation."""
    app = rewind_app
    started = failed_run(app, model)
    model.set_script(RECOVERED)
    app.store_call(lambda store: store.reopen_run(started["run_id"], INTERRUPTED))

    again = app.http.post(f"/api/runs/{started['run_id']}/rewind")
    assert again.status_code == 202, again.text
    assert again.json()["rewind"]["rewind_id"] == "interrupted"
    app.settle()
    assert app.view(started["run_id"])["status"] == "completed"


def test_a_rewind_racing_a_cancel_ends_cancelled_and_frees_the_session(
    rewind_app: InProcessApp, model: ScriptedModelServer, marker_dir: Path
) -> None:
    app = rewind_app
    started = failed_run(app, model)
    model.set_script(RECOVERED)
    model.hold_answers()  # the continuation's model call is in flight when the cancel arrives
    assert app.http.post(f"/api/runs/{started['run_id']}/rewind").status_code == 202
    assert app.cancel(started["run_id"]).status_code == 202
    model.release_answers()
    app.settle()
    view = app.view(started["run_id"])
    assert view["status"] == "cancelled", view
    assert tool_attempts(marker_dir) == 1
    assert_session_free(app, started["session_id"])
    # A cancelled run is not failed: no rewind.
    assert app.http.post(f"/api/runs/{started['run_id']}/rewind").json()["code"] == "run_not_failed"


def test_a_cancel_the_run_outlived_does_not_cancel_its_rewind(
    rewind_app: InProcessApp, model: ScriptedModelServer, marker_dir: Path
) -> None:
    """A cancel that lost the race with the failure (it read the run running and stored its request as the run
    failed, and was told 409 `run_finished`) must not stop the run once it is rewound: the rewind asks it to go on."""
    app = rewind_app
    started = failed_run(app, model)
    run_id = started["run_id"]
    app.store_call(lambda store: store.update_run(run_id, cancel_requested_at=datetime.now(UTC)))
    assert app.cancel(run_id).status_code == 409

    model.set_script(RECOVERED)
    assert app.http.post(f"/api/runs/{run_id}/rewind").status_code == 202
    app.settle()
    view = app.view(run_id)
    assert view["status"] == "completed", view
    assert view["output"]["text"] == "Invoice 7 is filed."
    assert tool_attempts(marker_dir) == 1


@pytest.fixture
def notifying_rewind_app(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], marker_dir: Path
) -> Iterator[tuple[InProcessApp, WebhookReceiver]]:
    """`rewind_app`, sending the runs' events to a receiver."""
    (marker_dir / "slow_step.release").touch()
    with WebhookReceiver() as receiver, app_with(MODEL_RETRY_MAX_ATTEMPTS="1", WEBHOOK_URLS=receiver.url,
                                                 WEBHOOK_SECRET=SECRET) as app:
        yield app, receiver


def test_each_end_of_a_rewound_run_is_notified(
    notifying_rewind_app: tuple[InProcessApp, WebhookReceiver], model: ScriptedModelServer
) -> None:
    """A run that fails, is rewound and fails again tells its webhook twice (the second failure is news: someone
    may be paged for it), each under a `webhook-id` of its own; then its completion after the next rewind."""
    app, receiver = notifying_rewind_app
    run_id = failed_run(app, model)["run_id"]
    assert app.http.post(f"/api/runs/{run_id}/rewind").status_code == 202  # the model is still down
    until_the_model_calls_give_up(app)
    assert app.view(run_id)["status"] == "failed"
    model.set_script(RECOVERED)
    assert app.http.post(f"/api/runs/{run_id}/rewind").status_code == 202
    app.settle()
    assert app.view(run_id)["status"] == "completed"
    got = receiver.accepted()
    assert [d.payload["type"] for d in got] == ["run.failed", "run.failed", "run.completed"]
    assert all(d.verified for d in got) and len({d.headers["webhook-id"] for d in got}) == 3


def test_a_failed_run_is_rewound_once_its_refused_end_is_recorded(
    notifying_rewind_app: tuple[InProcessApp, WebhookReceiver], model: ScriptedModelServer
) -> None:
    """The store refused the run's `run.failed` event, so its orchestration records it again on a durable timer and
    has not completed: a rewind answered 409 `run_not_rewindable` (fork it instead), though only the wait stood in
    the way. It now answers 409 `run_still_ending`; once the event is recorded the rewind goes on."""
    app, receiver = notifying_rewind_app
    with events_refused(app.host):
        run_id = failed_run(app, model)["run_id"]
        refused = app.http.post(f"/api/runs/{run_id}/rewind")
        assert refused.status_code == 409, refused.text
        assert (refused.json()["code"], refused.json()["field"]) == ("run_still_ending", "path.run_id")
    app.advance(3600)
    model.set_script(RECOVERED)
    assert app.http.post(f"/api/runs/{run_id}/rewind").status_code == 202
    app.settle()
    assert app.view(run_id)["status"] == "completed"
    assert [d.payload["type"] for d in receiver.accepted()] == ["run.failed", "run.completed"]


def test_a_run_left_open_by_an_interrupted_rewind_can_be_cancelled(
    rewind_app: InProcessApp, model: ScriptedModelServer
) -> None:
    """A host kill between the reopen and the start leaves the run open with a finished orchestration. Its owner may
    give up on it instead of sending the rewind again: the cancel closes it (it was a 500, and the session stayed
    busy for good)."""
    app = rewind_app
    started = failed_run(app, model)
    run_id = started["run_id"]
    model.set_script(RECOVERED)
    app.store_call(lambda store: store.reopen_run(run_id, INTERRUPTED))
    calls_before = model.log.total

    cancelled = app.cancel(run_id)
    assert cancelled.status_code == 202, cancelled.text
    assert app.view(run_id)["status"] == "cancelled"
    assert app.http.post(f"/api/runs/{run_id}/rewind").json()["code"] == "run_not_failed"
    assert_session_free(app, started["session_id"])
    assert model.log.total == calls_before + 2  # the follow-up's call and answer, nothing of the cancelled run


def test_a_cancel_between_a_rewinds_reopen_and_start_ends_the_run_cancelled(
    rewind_app: InProcessApp, model: ScriptedModelServer, marker_dir: Path
) -> None:
    app = rewind_app
    started, calls_before = failed_run_to_recover(app, model)
    run_id = started["run_id"]
    with ThreadPoolExecutor(1) as pool, paused(app, "reopen_run") as pause:
        rewound = pool.submit(app.http.post, f"/api/runs/{run_id}/rewind")
        pause.wait_reached()  # the run is open again; its continuation is not started yet
        cancelled = app.cancel(run_id)
        pause.release()
        assert rewound.result().status_code == 202
    assert cancelled.status_code == 202, cancelled.text
    app.settle()
    view = app.view(run_id)
    assert view["status"] == "cancelled", view
    assert model.log.total == calls_before  # the continuation read the cancel before asking the model
    assert tool_attempts(marker_dir) == 1
    assert_session_free(app, started["session_id"])


def test_a_session_deleted_between_a_rewinds_reopen_and_start_leaves_no_continuation(
    rewind_app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The delete found the run's orchestration finished (nothing to stop) and purged its history; the rewind then
    started a continuation for a run that no longer exists: it asked the model, ran on with no session and kept a
    Durable history nothing would purge."""
    app = rewind_app
    started, calls_before = failed_run_to_recover(app, model)
    run_id = started["run_id"]
    with ThreadPoolExecutor(1) as pool, paused(app, "reopen_run") as pause:
        rewound = pool.submit(app.http.post, f"/api/runs/{run_id}/rewind")
        pause.wait_reached()
        deleted = app.http.delete(f"/api/sessions/{started['session_id']}", params={"cancel": "true"})
        assert deleted.status_code == 204, deleted.text
        pause.release()
        answer = rewound.result()
    assert answer.status_code == 404 and answer.json()["code"] == "run_not_found", answer.text
    app.settle()
    assert model.log.total == calls_before
    assert app.host.get_status(run_id) is None  # no orchestration, no history left behind
    assert started["session_id"] not in app.snapshot().sessions


def test_a_rewind_that_read_the_run_before_the_last_rewind_failed_again_reopens_it(
    rewind_app: InProcessApp, model: ScriptedModelServer
) -> None:
    """A second rewind read the run while the first one's continuation ran (open, with a rewind), and its
    orchestration's state after that continuation failed again. It took the run for one whose rewind was
    interrupted and started the continuation without reopening the run: the continuation ended at once (the run was
    closed), the run stayed failed under a 202, and it could never be rewound again (no resume point any more)."""
    app = rewind_app
    started = failed_run(app, model)  # the model stays down
    run_id = started["run_id"]
    assert app.http.post(f"/api/runs/{run_id}/rewind").status_code == 202
    first_read = paused(app, "get_run", equal={"run_id": run_id}, absent=("session_id",))  # the rewind's own read
    with ThreadPoolExecutor(1) as pool, first_read as pause:
        second = pool.submit(app.http.post, f"/api/runs/{run_id}/rewind")
        pause.wait_reached()  # it read the run open, rewound once
        until_the_model_calls_give_up(app)  # the first rewind's continuation fails like the run did
        model.set_script(RECOVERED)
        pause.release()
        answer = second.result()
    assert answer.status_code == 202, answer.text
    app.settle()
    view = app.view(run_id)
    assert view["status"] == "completed", view
    assert len(view["rewinds"]) == 2 and answer.json()["rewind"] == view["rewinds"][1]


def test_a_start_that_interrupts_a_run_left_open_by_an_interrupted_rewind_gets_the_session(
    rewind_app: InProcessApp, model: ScriptedModelServer
) -> None:
    """`if_busy=interrupt` cancels the session's active run: one left open by a rewind whose host died answered 500
    after queueing the new run behind a run that would never end."""
    app = rewind_app
    started = failed_run(app, model)
    model.set_script(RECOVERED)
    app.store_call(lambda store: store.reopen_run(started["run_id"], INTERRUPTED))
    answer = app.http.post("/api/agents/helper/runs", json={
        "input": "Next.", "session_id": started["session_id"], "if_busy": "interrupt",
    })
    assert answer.status_code == 202, answer.text
    app.settle()
    assert app.view(started["run_id"])["status"] == "cancelled"
    app.advance(10)  # the queued run asks for its turn on a timer
    assert app.view(answer.json()["run_id"])["status"] == "completed"


def test_a_poll_that_read_the_failed_run_just_before_its_rewind_does_not_end_the_follow(
    rewind_app: InProcessApp, model: ScriptedModelServer, marker_dir: Path
) -> None:
    """A poll read the run failed, then the orchestration's state after a rewind had started the continuation. It took
    the record as final ("a finished record never changes again", but a rewind reopens it) and answered `failed`
    without a continuation token: the client stopped following a run that went on."""
    app = rewind_app
    started = failed_run(app, model)
    run_id = started["run_id"]
    model.set_script(RECOVERED)
    model.hold_answers()  # the continuation stays in flight while the poll is answered
    poll_read = paused(app, "get_run", equal={"run_id": run_id}, absent=("session_id",))
    with ThreadPoolExecutor(1) as pool, poll_read as pause:
        poll = pool.submit(app.poll, run_id, started["continuation_token"])
        pause.wait_reached()  # the poll read the run failed
        (pause_dir(marker_dir) / "get_run.json").unlink()  # disarmed: the rewind's own read goes through
        assert app.http.post(f"/api/runs/{run_id}/rewind").status_code == 202
        pause.release()
        view = poll.result().json()
    assert view["status"] != "failed" and view["continuation_token"], view
    model.release_answers()
    app.settle()
    done = app.poll(run_id, view["continuation_token"]).json()
    assert done["status"] == "completed" and done["output"]["text"] == "Invoice 7 is filed."


def rewind_killed_between_its_writes(app: InProcessApp, store_backend: str, run_id: str) -> None:
    """On Cosmos the reopen is two writes (two containers: no transaction spans them); the host dies between them."""
    if store_backend != "cosmos":
        pytest.skip("one SQLite transaction: nothing is half written")
    KilledAfterOneWrite.arm(app.services().current().store)
    assert app.http.post(f"/api/runs/{run_id}/rewind").status_code == 500


@watches_the_app_in_process
def test_a_rewind_killed_between_its_writes_leaves_the_session_free_for_a_new_run(
    rewind_app: InProcessApp, model: ScriptedModelServer, store_backend: str
) -> None:
    """The session was claimed first: a host killed before the run was written left the session held by the failed
    run, which nothing released - every new run in the session failed (500), a queued one waited forever."""
    app = rewind_app
    started = failed_run(app, model)
    run_id = started["run_id"]
    model.set_script(RECOVERED)
    rewind_killed_between_its_writes(app, store_backend, run_id)

    assert_session_free(app, started["session_id"])
    again = app.http.post(f"/api/runs/{run_id}/rewind")  # too late: the conversation went on without it
    assert again.status_code == 409 and again.json()["code"] == "run_not_latest", again.text
    view = app.view(run_id)
    assert view["status"] == "failed" and view["rewinds"] == [], view
    assert view["error"]["code"] == "model_call_failed"


@watches_the_app_in_process
def test_a_rewind_killed_between_its_writes_goes_on_when_sent_again(
    rewind_app: InProcessApp, model: ScriptedModelServer, store_backend: str, marker_dir: Path
) -> None:
    app = rewind_app
    started, calls_before = failed_run_to_recover(app, model)
    run_id = started["run_id"]
    rewind_killed_between_its_writes(app, store_backend, run_id)

    again = app.http.post(f"/api/runs/{run_id}/rewind")
    assert again.status_code == 202, again.text
    app.settle()
    view = app.view(run_id)
    assert view["status"] == "completed" and len(view["rewinds"]) == 1, view
    assert model.log.total == calls_before + 1 and tool_attempts(marker_dir) == 1
    assert_session_free(app, started["session_id"])


FAILING_AGAIN_AFTER_ANOTHER_TOOL = Script(rules=[  # the first rewind gets one step further, then fails again
    Rule(match=Match(last_tool_result="invoice-8"), reply=Reply.fail(Fault(status=500, message="model down"))),
    Rule(match=Match(last_tool_name="slow_step"), reply=Reply.call("slow_step", {"label": "invoice-8"})),
])


@watches_the_app_in_process
def test_a_rewind_that_lost_the_race_does_not_reopen_a_later_failure_from_its_stale_step(
    rewind_app: InProcessApp, model: ScriptedModelServer, marker_dir: Path
) -> None:
    """Two rewinds at once: the loser read the run and its resume point, then was held before its reopen while the
    winner's continuation got a step further and failed again. The loser then reopened the run - a failure it had
    not seen - and went on from the step of the first failure (its record and its resume point from there)."""
    app = rewind_app
    started = failed_run(app, model)
    run_id = started["run_id"]
    store = app.services().current().store
    reopen = store.reopen_run
    held, go_on = threading.Event(), threading.Event()

    async def first_one_held(run: str, rewind: dict, **options: object) -> object:
        if not held.is_set():
            held.set()
            await asyncio.to_thread(go_on.wait, 60)
        return await reopen(run, rewind, **options)

    store.reopen_run = first_one_held
    try:
        with ThreadPoolExecutor(1) as pool:
            loser = pool.submit(app.http.post, f"/api/runs/{run_id}/rewind")
            assert held.wait(30)  # it read the run failed and the failed orchestration's resume point
            model.set_script(FAILING_AGAIN_AFTER_ANOTHER_TOOL)
            assert app.http.post(f"/api/runs/{run_id}/rewind").status_code == 202
            until_the_model_calls_give_up(app)
            failed_again = app.view(run_id)
            assert failed_again["status"] == "failed" and tool_attempts(marker_dir) == 2, failed_again
            model.set_script(RECOVERED)
            go_on.set()
            answer = loser.result()
    finally:
        store.reopen_run = reopen
    assert answer.status_code == 409 and answer.json()["code"] == "run_not_failed", answer.text
    app.settle()
    assert app.view(run_id)["status"] == "failed"

    third = app.http.post(f"/api/runs/{run_id}/rewind")  # a rewind of the failure as it is now
    assert third.status_code == 202, third.text
    assert (third.json()["rewind"]["from_step"], third.json()["rewind"]["iteration"]) == ("call_model", 3)
    app.settle()
    done = app.view(run_id)
    assert done["status"] == "completed" and len(done["rewinds"]) == 2, done
    roles = [m["role"] for m in app.session_messages(started["session_id"])]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert tool_attempts(marker_dir) == 2


def stream_events(app: InProcessApp, run_id: str, last_event_id: str | None = None) -> tuple[int, list]:
    """One connection to the run's stream (resumed from `last_event_id`): its status code and events."""
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    with connect_sse(app.http, "GET", f"/api/runs/{run_id}/stream", headers=headers) as source:
        return source.response.status_code, list(source.iter_sse()) if source.response.status_code == 200 else []


def test_a_stream_client_back_after_done_hears_of_each_rewind(
    rewind_app: InProcessApp, model: ScriptedModelServer
) -> None:
    """A client back with `done`'s id gets 204 (again and again) until a rewind: then the run's new end, even when the
    rewound run failed again without writing anything (the same updates, the same status, another `done`)."""
    app = rewind_app
    run_id = failed_run(app, model)["run_id"]
    code, events = stream_events(app, run_id)
    assert code == 200 and events[-1].event == "done"
    first_done = events[-1].id
    assert [stream_events(app, run_id, first_done)[0] for _ in range(2)] == [204, 204]

    assert app.http.post(f"/api/runs/{run_id}/rewind").status_code == 202  # the model is still down
    until_the_model_calls_give_up(app)
    assert app.view(run_id)["status"] == "failed"
    code, events = stream_events(app, run_id, first_done)
    assert code == 200 and [e.event for e in events] == ["done"], events
    assert len(events[0].json()["rewinds"]) == 1
    assert [stream_events(app, run_id, events[-1].id)[0] for _ in range(2)] == [204, 204]

    model.set_script(RECOVERED)
    assert app.http.post(f"/api/runs/{run_id}/rewind").status_code == 202
    app.settle()
    code, events = stream_events(app, run_id, first_done)
    assert code == 200 and events[-1].event == "done" and events[-1].json()["status"] == "completed", events
