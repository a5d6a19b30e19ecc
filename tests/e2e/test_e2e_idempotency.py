"""`Idempotency-Key` on a start whose store write landed but failed all the same (an error after the store took it,
or its answer lost): the run written is the request's run, started as if the write had answered, and a retry with
the same key answers with it; the key never starts a second run, even when the store cannot even say whether the run
was written. On both stores, over real HTTP."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
from e2e_harness import InProcessApp, post_concurrently
from e2e_settings import watches_the_app_in_process
from lost_writes import run_items_late, run_writes_late, run_writes_lost

from agent_runtime.approvers import ANONYMOUS
from scripted_model import Script, ScriptedModelServer


def owner_runs(app: InProcessApp) -> set[str]:
    return {r.run_id for r in app.store_call(lambda s: s.list_owner_runs(ANONYMOUS, limit=100)).items}


def start_with_a_lost_write(
    app: InProcessApp, body: dict[str, Any], headers: dict[str, str], *, read_fails: bool = False
) -> tuple[httpx.Response, str]:
    """A start whose write of its run lands and then raises (`lost_writes`): its answer, and the run it wrote."""
    with run_writes_lost(app, read_fails=read_fails) as written:
        first = app.http.post("/api/agents/helper/runs", json=body, headers=headers)
    assert len(written) == 1, first.text
    return first, written[0]


def keyed_start(named_session: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """A start's body and a key of its own (one Cosmos database serves the whole module)."""
    body = {"input": "Say hello", **({"session_id": uuid.uuid4().hex} if named_session else {})}
    return body, {"Idempotency-Key": f"order-{uuid.uuid4().hex}"}


@watches_the_app_in_process  # wraps the app's own store
@pytest.mark.parametrize("named_session", [False, True], ids=["new-session", "named-session"])
def test_a_start_whose_run_was_written_before_it_failed_makes_one_run(
    app: InProcessApp, model: ScriptedModelServer, named_session: bool
) -> None:
    model.set_script(Script.of("Hello there."))
    body, headers = keyed_start(named_session)
    runs_before = owner_runs(app)
    first, run_id = start_with_a_lost_write(app, body, headers)
    app.settle()
    again = app.http.post("/api/agents/helper/runs", json=body, headers=headers)

    assert (again.status_code, again.json().get("run_id")) == (200, run_id), again.text  # the run written, no other
    assert owner_runs(app) - runs_before == {run_id}
    assert (first.status_code, first.json()["run_id"]) == (202, run_id), first.text  # started as if it had answered
    assert again.json()["status"] == "completed" and again.json()["output"]["text"] == "Hello there."
    assert len(model.log.requests) == 1


@watches_the_app_in_process  # wraps the app's own store (or its runs container)
@pytest.mark.parametrize("late", ["begin_run", "run_item"])
def test_a_start_whose_run_write_lands_after_it_failed_holds_no_session(
    app: InProcessApp, model: ScriptedModelServer, late: str
) -> None:
    """The store's answer came before its write (a timed out request the store applied later): the start read its
    run absent, released its key and failed, and then the write landed - a run holding the session that nobody
    started nor would close, every later start in the session 409 `session_busy`. Now the failed start closes its
    run in the run's place (`close_unwritten_start`): the late write finds that and claims nothing (Cosmos: the
    claim that landed first is given back), and a retry with the key starts the one run."""
    if late == "run_item" and app.store_backend != "cosmos":
        pytest.skip("a Cosmos store writes the claim and the run apart")
    model.set_script(Script.of("Hello there."))
    body, headers = keyed_start(named_session=True)
    with (run_writes_late if late == "begin_run" else run_items_late)(app) as on_their_way:
        first = app.http.post("/api/agents/helper/runs", json=body, headers=headers)
    assert first.status_code >= 500 and len(on_their_way) == 1, first.text
    app.store_call(lambda _store: on_their_way[0]())  # the write lands now

    again = app.http.post("/api/agents/helper/runs", json={**body, "wait_seconds": 10}, headers=headers)
    assert (again.status_code, again.json()["status"]) == (200, "completed"), again.text
    assert again.json()["output"]["text"] == "Hello there."
    runs = app.store_call(lambda store: store.list_runs(body["session_id"]))
    assert [(r.run_id, r.status) for r in runs if r.ordinal] == [(again.json()["run_id"], "completed")]
    assert all(r.finished for r in runs), runs  # the first request's run: closed in its place, not holding anything


@watches_the_app_in_process  # wraps the app's own store
def test_a_start_that_cannot_tell_whether_its_run_was_written_keeps_its_key(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """Its error stands, and the key stays with the run id it claimed: a retry answers with the run written."""
    model.set_script(Script.of("Hello there."))
    body, headers = keyed_start(named_session=True)
    runs_before = owner_runs(app)
    first, run_id = start_with_a_lost_write(app, body, headers, read_fails=True)
    assert first.status_code >= 500, first.text
    again = app.http.post("/api/agents/helper/runs", json=body, headers=headers)
    assert again.json().get("run_id") == run_id, again.text
    assert owner_runs(app) - runs_before == {run_id}


@watches_the_app_in_process  # wraps the app's own store, and ages its key's claim
def test_a_retry_starts_the_run_its_first_request_wrote_but_never_started(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first request failed unable to tell whether its run was written (it was): its run has no orchestration.
    Once that request is surely over, a retry starts the run as the first request would have; of retries arriving
    together exactly one does, and the others answer with the run."""
    model.set_script(Script.of("Hello there."))
    body, headers = keyed_start(named_session=True)
    first, run_id = start_with_a_lost_write(app, body, headers, read_fails=True)
    assert first.status_code >= 500, first.text
    early = app.http.post("/api/agents/helper/runs", json=body, headers=headers)
    assert (early.status_code, early.json()["run_id"], early.json()["status"]) == (202, run_id, "queued"), early.text
    app.settle()
    assert model.log.requests == []  # the first request may still be on its way to start it: nobody else does

    monkeypatch.setattr(app.app_module("http_api.idempotency"), "ABANDONED_AFTER", timedelta(0))
    retries = post_concurrently(app.host.base_url, 5, "/api/agents/helper/runs", body, headers)
    assert {(r.status_code, r.json()["run_id"]) for r in retries} == {(202, run_id)}, [r.text for r in retries]
    app.settle()
    final = app.view(run_id)
    assert final["status"] == "completed", final
    assert final["output"]["text"] == "Hello there."
    assert len(model.log.requests) == 1
    assert [m["role"] for m in app.session_messages(body["session_id"])] == ["user", "assistant"]  # input once


def test_two_idempotency_keys_are_refused_and_start_nothing(app: InProcessApp, model: ScriptedModelServer) -> None:
    """Sent twice, the key arrives comma-joined (as the Functions host passes a repeated header): read as "k1,k2" it
    would be a key of its own, which a retry sending only "k1" would not find. So a comma is refused: 422."""
    model.set_script(Script.of("Hello."))
    body, headers = keyed_start(named_session=False)
    key = headers["Idempotency-Key"]
    before = owner_runs(app)
    for keys in ([key, f"{key}-2"], [key, key], [f"{key},{key}-2"]):
        response = app.http.post("/api/agents/helper/runs", json=body,
                                 headers=[("Idempotency-Key", value) for value in keys])
        assert response.status_code == 422, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert (response.json()["code"], response.json()["field"]) == ("invalid_idempotency_key",
                                                                       "header.Idempotency-Key")
    assert owner_runs(app) == before
    # The key alone still starts its run, once.
    once = [app.http.post("/api/agents/helper/runs", json=body, headers=headers) for _ in range(2)]
    assert [r.status_code in (200, 202) for r in once] == [True, True], [r.text for r in once]
    assert once[0].json()["run_id"] == once[1].json()["run_id"]
    assert len(owner_runs(app) - before) == 1
