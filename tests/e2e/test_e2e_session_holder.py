"""A session never stays held by a run that was never written (Cosmos: the session's claim and the run's record are
two writes in two containers, so a start can die or fail between them).

Before, the claim landed, the run's write failed, and the session named a run that did not exist: every later start
in it failed (500) or queued behind that run for good, and a run queued behind it waited forever. Likewise a session
whose run's finish was written but not its release."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
from e2e_harness import InProcessApp, post_concurrently
from e2e_settings import watches_the_app_in_process
from lost_writes import cosmos_writes_refused, run_items_refused
from openai import ConflictError, OpenAI

from scripted_model import Script, ScriptedModelServer
from session_store import RunRecord, SessionRecord, StoreUnavailableError

pytestmark = pytest.mark.parametrize("store_backend", [pytest.param("cosmos", marks=pytest.mark.cosmos)])

RUNS = "/api/agents/helper/runs"


def start_refused(app: InProcessApp, session_id: str, **body: str) -> str:
    """A start in `session_id` whose run item the store refuses after its claim of the session landed: its id."""
    with run_items_refused(app) as refused:
        failed = app.http.post(RUNS, json={"input": "Lost start", "session_id": session_id, **body})
    assert failed.status_code >= 500 and len(refused) == 1, failed.text
    return refused[0]


def held_by_a_lost_start(app: InProcessApp, model: ScriptedModelServer, *answers: str) -> tuple[str, str]:
    """A new session left held by a start whose run was never written, and the model's next answers: (session, run)."""
    model.set_script(Script.of(*answers))
    session_id = uuid.uuid4().hex
    return session_id, start_refused(app, session_id)


def session(app: InProcessApp, session_id: str) -> SessionRecord:
    found = app.store_call(lambda store: store.get_session(session_id))
    assert found is not None
    return found


def after_the_grace(app: InProcessApp, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's clock moved past the time a start may take to write its run (`rules.UNWRITTEN_HOLDER_AFTER`)."""
    store = app.services().current().store
    grace = app.app_module("session_store.rules").UNWRITTEN_HOLDER_AFTER + timedelta(seconds=1)
    real = store._clock
    monkeypatch.setattr(store, "_clock", lambda: real() + grace)


def queued_run_gets_its_turn(
    app: InProcessApp, monkeypatch: pytest.MonkeyPatch, session_id: str, run_id: str, answer: str
) -> None:
    """Past the grace, the run queued in `session_id` (behind a run never written) runs to `answer` and the session
    ends free."""
    after_the_grace(app, monkeypatch)
    app.advance(10)  # the queued run asks for its turn on a timer
    assert app.view(run_id)["output"]["text"] == answer
    held = session(app, session_id)
    assert (held.active_run_id, held.queued_run_ids) == (None, [])


@watches_the_app_in_process  # wraps the app's store's runs container, and moves its clock
def test_a_start_whose_run_was_never_written_leaves_the_session_free(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id, lost = held_by_a_lost_start(app, model, "Hello again.", "And again.")
    early = app.http.post(RUNS, json={"input": "Hello?", "session_id": session_id})
    assert (early.status_code, early.json()["code"]) == (409, "session_busy"), early.text  # its write may be coming

    after_the_grace(app, monkeypatch)
    nxt = app.http.post(RUNS, json={"input": "Hello?", "session_id": session_id})
    assert nxt.status_code == 202, nxt.text
    app.settle()
    assert app.view(nxt.json()["run_id"])["output"]["text"] == "Hello again."
    after = app.start(input="Still there?", session_id=session_id)  # and the session is released after it
    app.settle()
    assert app.view(after["run_id"])["output"]["text"] == "And again."
    # The run that was never written is closed in its place, as a start that did not happen: no run to show.
    lost_view = app.http.get(f"/api/runs/{lost}")
    assert (lost_view.status_code, lost_view.json()["code"]) == (404, "run_not_found"), lost_view.text
    closed = app.store_call(lambda store: store.get_run(lost))
    assert closed is not None and (closed.status, (closed.error or {})["code"]) == ("failed", "start_interrupted")
    assert [m["role"] for m in app.session_messages(session_id)] == ["user", "assistant"] * 2


@watches_the_app_in_process  # wraps the app's store's runs container, and moves its clock
def test_a_run_queued_behind_a_run_never_written_gets_its_turn(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id, _ = held_by_a_lost_start(app, model, "Hello again.")
    queued = app.http.post(RUNS, json={"input": "Hello?", "session_id": session_id, "if_busy": "enqueue"})
    assert (queued.status_code, queued.json()["status"]) == (202, "queued"), queued.text
    app.settle()

    queued_run_gets_its_turn(app, monkeypatch, session_id, queued.json()["run_id"], "Hello again.")


@watches_the_app_in_process  # wraps the app's store's runs container, and moves its clock
def test_of_starts_racing_for_a_session_held_by_a_run_never_written_exactly_one_wins(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id, _ = held_by_a_lost_start(app, model, "Only one.")
    after_the_grace(app, monkeypatch)

    answers = post_concurrently(app.host.base_url, 5, RUNS, {"input": "Me?", "session_id": session_id}, {})
    codes = sorted(a.status_code for a in answers)
    assert codes == [202, 409, 409, 409, 409], [a.text for a in answers]
    assert {a.json()["code"] for a in answers if a.status_code == 409} == {"session_busy"}
    winner = next(a.json()["run_id"] for a in answers if a.status_code == 202)
    assert session(app, session_id).active_run_id == winner
    app.settle()
    assert app.view(winner)["output"]["text"] == "Only one."
    assert len(model.log.requests) == 1


@watches_the_app_in_process  # wraps the app's store's runs container, and moves its clock
def test_a_run_queued_behind_a_queued_run_never_written_gets_its_turn(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session is handed on to the first queued run when its holder finishes: one never written is passed over
    (else the session was handed to it, and the runs queued behind it waited forever)."""
    model.set_script(Script.of("First.", "Third."))
    model.hold_answers()
    first = app.start(input="One", session_id=uuid.uuid4().hex)
    session_id = first["session_id"]
    model.log.wait_for(1, timeout=60)  # the first run holds the session
    start_refused(app, session_id, if_busy="enqueue")
    third = app.http.post(RUNS, json={"input": "Three", "session_id": session_id, "if_busy": "enqueue"})
    assert (third.status_code, third.json()["status"]) == (202, "queued"), third.text

    model.release_answers()
    app.settle()  # the first run finished and handed the session to the run never written
    assert app.view(first["run_id"])["output"]["text"] == "First."
    queued_run_gets_its_turn(app, monkeypatch, session_id, third.json()["run_id"], "Third.")


@watches_the_app_in_process  # wraps the app's store's sessions container, and moves its clock
def test_a_session_still_held_by_a_run_whose_finish_did_not_release_it_is_freed(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`finish_run` wrote the finished run, then failed releasing the session (its second write). Before, every
    start in the session failed with a 500 and it stayed held."""
    model.set_script(Script.of("Free again."))
    session_id = uuid.uuid4().hex
    app.store_call(lambda store: store.create_session(session_id, "helper"))
    ended = app.store_call(lambda store: store.begin_run(RunRecord(run_id=uuid.uuid4().hex, session_id=session_id,
                                                                   agent="helper")))
    store = app.services().current().store
    with cosmos_writes_refused(store, "sessions", "replace_item"), pytest.raises(StoreUnavailableError):
        app.store_call(lambda store: store.finish_run(ended.run_id, "completed", output={"text": "done"}))

    early = app.http.post(RUNS, json={"input": "Hello?", "session_id": session_id})
    assert (early.status_code, early.json()["code"]) == (409, "session_busy"), early.text
    after_the_grace(app, monkeypatch)
    nxt = app.http.post(RUNS, json={"input": "Hello?", "session_id": session_id})
    assert nxt.status_code == 202, nxt.text
    app.settle()
    assert app.view(nxt.json()["run_id"])["output"]["text"] == "Free again."
    assert app.store_call(lambda store: store.get_run(ended.run_id)).status == "completed"


@watches_the_app_in_process  # wraps the app's store's sessions container
def test_a_closing_model_call_retried_after_its_release_failed_frees_the_session(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The model call whose answer ends the run closes it (`close_if_final`): the run's close lands, the session's
    release (the second write) fails, and the activity fails. Its retry finds the run closed and must finish the
    close: before, it returned how the run ended and left the session held by the finished run, so the next start
    in it was refused `session_busy` until the store's grace (60 s) let a start release it. A host killed between
    the two writes (the activity delivered again after the restart) did the same."""
    model.set_script(Script.of("Done.", "Next."))
    session_id = uuid.uuid4().hex
    app.store_call(lambda store: store.create_session(session_id, "helper"))
    store = app.services().current().store
    def releases(item: Any, body: Any, *args: Any, **kwargs: Any) -> bool:  # finish_run's second write
        return bool(body["id"] == session_id and body.get("active_run_id") is None)

    with cosmos_writes_refused(store, "sessions", "replace_item", when=releases, times=1) as refused:
        first = app.start(input="Hello", session_id=session_id)
        app.settle()
        app.advance(5)  # the activity's retry waits on a durable timer (2 s)
    assert refused == [session_id]
    assert app.view(first["run_id"])["output"]["text"] == "Done."
    assert len(model.log) == 1  # the retry did not ask the model again
    assert session(app, session_id).active_run_id is None

    nxt = app.http.post(RUNS, json={"input": "Hello?", "session_id": session_id})
    assert nxt.status_code == 202, nxt.text
    app.settle()
    assert app.view(nxt.json()["run_id"])["output"]["text"] == "Next."


@watches_the_app_in_process  # wraps the app's store's runs container, and moves its clock
def test_a_response_chain_goes_on_after_a_start_in_its_session_that_was_never_written(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start in a Responses conversation's session claimed it and died before its run was written. Its claim
    stayed counted in the session's `run_count`, so `previous_response_id` of the latest response was refused as
    not the latest, for good (nothing else closes the dead claim): the conversation could not go on. Once the
    session goes on without the dead start, the chain continues, as on SQLite, where such a start leaves nothing."""
    model.set_script(Script.of("Hello Ann.", "Your name is Ann."))
    http = httpx.Client(timeout=300, trust_env=False)
    with OpenAI(base_url=f"{app.host.base_url}/api/v1", api_key="unused", http_client=http, max_retries=0) as client:
        first = client.responses.create(model="helper", input="I am Ann.")
        session_id = app.view(first.id.removeprefix("resp_").split("_")[0])["session_id"]
        start_refused(app, session_id)
        # Before the grace the dead start may still be writing its run: the session is busy (409, which the client
        # retries), not the response superseded (400 "not the latest", which reads as for good).
        with pytest.raises(ConflictError) as busy:
            client.responses.create(model="helper", input="Who am I?", previous_response_id=first.id)
        assert busy.value.code == "session_busy", busy.value.body
        after_the_grace(app, monkeypatch)
        second = client.responses.create(model="helper", input="Who am I?", previous_response_id=first.id)
    assert second.output_text == "Your name is Ann."
    assert [m["content"] for m in model.log.last.messages if m["role"] in ("user", "assistant")] == [
        "I am Ann.", "Hello Ann.", "Who am I?",
    ]
    assert session(app, session_id).run_count == 2
