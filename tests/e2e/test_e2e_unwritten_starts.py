"""A start that failed before its run was stored leaves a record closed in the run's place (`start_interrupted`,
`rules.is_unwritten_start`), kept so that a write of the run still on its way cannot land afterwards. It is no run
anyone started: before, it showed among the caller's runs (`GET /api/runs`) and answered on every run route, and a
failed fork's outlived the copy it was closed in, which no session delete could remove. Now the run routes answer
404 `run_not_found` for it and the lists leave it out, as an `Idempotency-Key` takes it for absent; the record
still refuses the late write. Both stores."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from e2e_harness import InProcessApp
from e2e_settings import watches_the_app_in_process
from lost_writes import AnswerLost, run_writes_late

from agent_runtime.approvers import ANONYMOUS
from http_api import idempotency
from http_api.idempotency import made_result
from scripted_model import Script, ScriptedModelServer
from session_store import RunRecord
from session_store.rules import is_unwritten_start

RUNS = "/api/agents/helper/runs"


def run_routes(run_id: str) -> list[tuple[str, str, dict[str, Any] | None]]:
    """Every route that finds a run by its id (the approvals' with an approval id of the run's shape)."""
    base = f"/api/runs/{run_id}"
    return [
        ("GET", base, None),
        ("GET", f"{base}/stream", None),
        ("POST", f"{base}/cancel", None),
        ("POST", f"{base}/rewind", None),
        ("POST", f"{base}/fork", {}),
        ("GET", f"{base}/transcript", None),
        ("GET", f"{base}/approvals", None),
        ("POST", f"{base}/approvals/{run_id}:call-1", {"decision": "approve"}),
        ("GET", f"{base}/approvals/{run_id}:call-1/context", None),
        ("GET", f"{base}/deliveries", None),
    ]


def assert_no_run(app: InProcessApp, run_id: str) -> None:
    for method, path, body in run_routes(run_id):
        answer = app.http.request(method, path, json=body)
        assert (answer.status_code, answer.json().get("code")) == (404, "run_not_found"), (method, path, answer.text)
    listed = app.http.get("/api/runs", params={"limit": 100}).json()["runs"]
    assert run_id not in [run["run_id"] for run in listed], listed


def stored(app: InProcessApp, run_id: str) -> RunRecord | None:
    return app.store_call(lambda store: store.get_run(run_id))


def land(app: InProcessApp, write: Any) -> object:
    """A write that was on its way lands now (on the host's loop); what it answers, or its error."""

    async def landing() -> object:
        try:
            return await write()
        except Exception as error:  # e.g. a fork's copy is gone: a late begin_run finds no session
            return error

    return app.store_call(lambda _store: landing())


def owned_runs(app: InProcessApp) -> list[RunRecord]:
    """The caller's run records in the store, whatever they are."""
    return app.store_call(lambda store: store.list_owner_runs(ANONYMOUS, limit=100)).items


@contextmanager
def run_item_lands_after_the_copy_is_deleted(app: InProcessApp) -> Iterator[list[object]]:
    """Cosmos: meanwhile a run item's create (not a closed start's record) fails after the claim of the session
    landed, and lands right after the next delete of that session (a failed fork's copy): yields what it answered."""
    store = app.services().current().store
    runs = store._db._c["runs"]
    create_item, delete_session = runs.create_item, store.delete_session
    on_its_way: list[dict[str, Any]] = []
    landed: list[object] = []

    async def slower_than_its_error(body: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if body.get("status") == "failed" or on_its_way:
            return await create_item(body, *args, **kwargs)
        on_its_way.append(body)
        raise AnswerLost("timed out; the write is still on its way")

    async def and_then_it_lands(session_id: str) -> bool:
        deleted = await delete_session(session_id)
        if on_its_way and not landed:
            landed.append(await store._portal.call(store._db.create("runs", on_its_way[0])))
        return deleted

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runs, "create_item", slower_than_its_error)
        patch.setattr(store, "delete_session", and_then_it_lands)
        yield landed


def listed_runs(app: InProcessApp) -> list[str]:
    return [run["run_id"] for run in app.http.get("/api/runs", params={"limit": 100}).json()["runs"]]


@watches_the_app_in_process  # wraps the app's own store and the key's release
def test_a_key_retry_never_answers_with_a_start_that_was_never_stored(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first request closed its start unwritten and could not release its key either (a store blip): a retry
    with the key must not answer with that record, a run every run route says does not exist, but say the first
    request is not done (409), until the key's claim is given up."""
    model.set_script(Script.of("Hello."))
    body = {"input": "Say hello", "session_id": uuid.uuid4().hex}
    headers = {"Idempotency-Key": f"key-{uuid.uuid4().hex}"}

    async def release_fails(store: Any, claim: Any) -> None:
        raise ConnectionError("the store is briefly unreachable")

    def briefly(store: Any, claim: Any, find: Any, wait_seconds: float = 0.5) -> Any:
        return made_result(store, claim, find, wait_seconds=wait_seconds)  # not 15 s of waiting in a test

    monkeypatch.setattr(idempotency, "release", release_fails)
    monkeypatch.setattr(idempotency, "made_result", briefly)
    with run_writes_late(app):
        first = app.http.post(RUNS, json=body, headers=headers)
    assert first.status_code >= 500, first.text
    [closed] = app.store_call(lambda store: store.list_runs(body["session_id"]))
    assert is_unwritten_start(closed), closed

    again = app.http.post(RUNS, json=body, headers=headers)
    assert (again.status_code, again.json()["code"]) == (409, "idempotency_key_busy"), again.text
    assert_no_run(app, closed.run_id)


@watches_the_app_in_process  # wraps the app's own store
def test_a_start_that_failed_before_its_run_was_stored_is_no_run(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of("Hello there."))
    session_id = uuid.uuid4().hex
    with run_writes_late(app) as on_their_way:
        failed = app.http.post(RUNS, json={"input": "Hello?", "session_id": session_id})
    assert failed.status_code >= 500 and len(on_their_way) == 1, failed.text
    [closed] = app.store_call(lambda store: store.list_runs(session_id))
    assert is_unwritten_start(closed), closed

    assert_no_run(app, closed.run_id)
    view = app.http.get(f"/api/sessions/{session_id}").json()
    assert view["runs"] == [], view
    late = land(app, on_their_way[0])  # the record still refuses the run's own write
    assert isinstance(late, RunRecord) and is_unwritten_start(late), late
    assert_no_run(app, closed.run_id)

    started = app.start(input="Hello?", session_id=session_id)  # the session goes on
    app.settle()
    assert app.view(started["run_id"])["output"]["text"] == "Hello there."
    assert listed_runs(app)[0] == started["run_id"]


def conversation(app: InProcessApp, model: ScriptedModelServer) -> str:
    """A finished run of the caller's, to fork."""
    model.set_script(Script.of("noted", "noted again"))
    started = app.start(input="one")
    app.settle()
    return started["run_id"]


@watches_the_app_in_process  # wraps the app's own store (or its runs container)
@pytest.mark.parametrize("lands", ["after", "between"])
def test_a_failed_fork_leaves_no_run_behind(app: InProcessApp, model: ScriptedModelServer, lands: str) -> None:
    """The fork's run write was on its way when the fork failed: it deleted its copy and closed its run in the run's
    place. The write lands after all that (`after`: refused), or between the delete and the close (`between`, Cosmos:
    the run's item after its claim of the copy; before, it stayed in the deleted copy, closed `failed`, and was
    listed among the caller's runs for good)."""
    if lands == "between" and app.store_backend != "cosmos":
        pytest.skip("a Cosmos store writes the claim and the run apart")
    original = conversation(app, model)
    before = listed_runs(app)
    known = {run.run_id for run in owned_runs(app)}
    if lands == "after":
        with run_writes_late(app) as on_their_way:
            failed = app.http.post(f"/api/runs/{original}/fork", json={"input": "one, again"})
        assert failed.status_code >= 500 and len(on_their_way) == 1, failed.text
        late = land(app, on_their_way[0])
        assert not isinstance(late, RunRecord) or is_unwritten_start(late), late
    else:
        with run_item_lands_after_the_copy_is_deleted(app) as landed:
            failed = app.http.post(f"/api/runs/{original}/fork", json={"input": "one, again"})
        assert failed.status_code >= 500 and len(landed) == 1 and landed[0] is not None, (failed.text, landed)

    forks = [run for run in owned_runs(app) if run.run_id not in known]
    assert [is_unwritten_start(run) for run in forks] == [True], forks  # only the record closed in its place
    assert app.store_call(lambda s: s.get_session(forks[0].session_id)) is None  # in the deleted copy
    assert_no_run(app, forks[0].run_id)
    assert listed_runs(app) == before
