"""`Idempotency-Key` on run starts: one run per key and body per principal, however many times and however
concurrently the request arrives; another body with the key is refused; another principal's key is its own."""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta

import pytest
from auth_people import ALICE, BOB
from e2e_harness import post_concurrently
from e2e_settings import watches_the_app_in_process
from lost_writes import run_writes_lost

from scripted_model import Reply, Script


def test_twenty_concurrent_starts_with_one_key_make_one_run(app_in, model) -> None:
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("easyauth") as (app, callers):
        headers = {**callers.headers(ALICE), "Idempotency-Key": "order-42"}
        body = {"input": "hello"}
        responses = post_concurrently(app.host.base_url, 20, "/api/agents/payer/runs", body, headers)
        assert all(r.status_code in (200, 202) for r in responses), [r.text for r in responses]
        assert len({r.json()["run_id"] for r in responses}) == 1
        assert len({r.json()["session_id"] for r in responses}) == 1
        app.settle()
        assert len(app.store_call(lambda store: store.list_owner_runs(ALICE.id)).items) == 1

        # Again later: the same run, answered as a poll (200 now that it completed).
        again = app.http.post("/api/agents/payer/runs", json=body, headers=headers)
        assert again.status_code == 200 and again.json()["run_id"] == responses[0].json()["run_id"]
        assert again.json()["output"]["text"] == "Hi."
        # The same key with another body: 422, and no run.
        other = app.http.post("/api/agents/payer/runs", json={"input": "something else"}, headers=headers)
        assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"
        assert other.json()["field"] == "header.Idempotency-Key"
        # Bob's key of the same name is his own.
        bobs = app.http.post("/api/agents/payer/runs", json=body,
                             headers={**callers.headers(BOB), "Idempotency-Key": "order-42"})
        assert bobs.status_code == 202 and bobs.json()["run_id"] != again.json()["run_id"]
        app.settle()
        assert len(app.store_call(lambda store: store.list_owner_runs(ALICE.id)).items) == 1


def test_a_start_that_fails_does_not_burn_its_key(app_in, model) -> None:
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("easyauth") as (app, callers):
        alice = callers.headers(ALICE)
        bob = callers.headers(BOB)
        assert app.http.post("/api/agents/payer/runs", json={"input": "x", "session_id": "bobs"},
                             headers=bob).status_code == 202
        keyed = {**alice, "Idempotency-Key": "k1"}
        body = {"input": "x", "session_id": "bobs"}
        first = app.http.post("/api/agents/payer/runs", json=body, headers=keyed)
        assert first.status_code == 404  # Bob's session: not Alice's
        # The failure released the key: the same request answers the same way again (not a stuck "in progress").
        assert app.http.post("/api/agents/payer/runs", json=body, headers=keyed).status_code == 404
        ok = app.http.post("/api/agents/payer/runs", json={"input": "x", "session_id": "alices"}, headers=keyed)
        assert ok.status_code == 202, ok.text


def test_workflow_starts_are_idempotent_too(app_in, model) -> None:
    with app_in("easyauth") as (app, callers):
        headers = {**callers.headers(ALICE), "Idempotency-Key": "publish-1"}
        body = {"input": {"title": "T"}}
        responses = post_concurrently(app.host.base_url, 20, "/api/workflows/publish_flow/runs", body, headers)
        assert all(r.status_code == 202 for r in responses), [r.text for r in responses]
        assert len({r.json()["run_id"] for r in responses}) == 1
        other = app.http.post("/api/workflows/publish_flow/runs", json={"input": {"title": "U"}}, headers=headers)
        assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"
        app.settle()
        assert len(app.store_call(lambda store: store.list_owner_runs(ALICE.id)).items) == 1


@watches_the_app_in_process  # wraps the app's own store
@pytest.mark.parametrize("store", ["sqlite", pytest.param("cosmos", marks=pytest.mark.cosmos)])
def test_a_workflow_start_whose_run_was_written_before_it_failed_makes_one_run(app_in, model, store) -> None:
    """Its write of the run landed, then failed (`lost_writes`): the run written is started, and a retry with the key
    answers with it, as for an agent run (`tests/e2e/test_e2e_idempotency.py`)."""
    with app_in("easyauth", store=store) as (app, callers):
        headers = {**callers.headers(ALICE), "Idempotency-Key": f"publish-{uuid.uuid4().hex}"}
        body = {"input": {"title": "T"}}
        before = {r.run_id for r in app.store_call(lambda s: s.list_owner_runs(ALICE.id)).items}
        with run_writes_lost(app) as written:
            first = app.http.post("/api/workflows/publish_flow/runs", json=body, headers=headers)
        app.settle()
        again = app.http.post("/api/workflows/publish_flow/runs", json=body, headers=headers)
        assert len(written) == 1, first.text
        assert again.json().get("run_id") == written[0], again.text
        assert {r.run_id for r in app.store_call(lambda s: s.list_owner_runs(ALICE.id)).items} - before == {
            written[0]
        }
        assert (first.status_code, first.json()["run_id"]) == (202, written[0]), first.text
        assert again.json()["status"] == "requires_action"  # its orchestration runs: at its approval gate


@watches_the_app_in_process  # wraps the app's own store, and ages its key's claim
def test_a_retry_starts_the_workflow_run_its_first_request_wrote_but_never_started(app_in, model, monkeypatch) -> None:
    """The first request failed unable to tell whether its run was written (it was, without its orchestration): once
    that request is surely over, a retry with the key starts that run (`tests/e2e/test_e2e_idempotency.py`)."""
    with app_in("easyauth") as (app, callers):
        headers = {**callers.headers(ALICE), "Idempotency-Key": "publish-1"}
        body = {"input": {"title": "T"}}
        with run_writes_lost(app, read_fails=True) as written:
            first = app.http.post("/api/workflows/publish_flow/runs", json=body, headers=headers)
        assert first.status_code >= 500 and len(written) == 1, first.text
        monkeypatch.setattr(app.app_module("http_api.idempotency"), "ABANDONED_AFTER", timedelta(0))
        again = app.http.post("/api/workflows/publish_flow/runs", json=body, headers=headers)
        assert (again.status_code, again.json()["run_id"]) == (202, written[0]), again.text
        app.settle()
        view = app.http.get(f"/api/workflows/runs/{written[0]}", headers=callers.headers(ALICE)).json()
        assert view["status"] == "requires_action", view  # its orchestration runs: at its approval gate
        assert len(app.store_call(lambda s: s.list_owner_runs(ALICE.id)).items) == 1


def test_another_caller_cannot_reach_a_key_ledger_through_a_session_id(app_in, model) -> None:
    """The ledger of (Alice, key) lives in a partition named from a hash of both. Bob, knowing them, names that
    partition as his session: refused at the edge (422 on start, 404 on delete), so Alice's retry is her first run."""
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("easyauth") as (app, callers):
        alice = {**callers.headers(ALICE), "Idempotency-Key": "order-7"}
        body = {"input": "hello"}
        first = app.http.post("/api/agents/payer/runs", json=body, headers=alice)
        assert first.status_code == 202, first.text
        app.settle()
        ledger = "idempotency." + hashlib.sha256(f"{ALICE.id}\norder-7".encode()).hexdigest()[:48]
        assert app.store_call(lambda store: store.list_effects(ledger, kind="idempotency"))  # the record is there

        bob = callers.headers(BOB)
        for session_id in (ledger, ledger.upper()):
            hijack = app.http.post("/api/agents/payer/runs", json={"input": "x", "session_id": session_id},
                                   headers=bob)
            assert hijack.status_code == 422, hijack.text
            assert hijack.json()["field"] == "body.session_id" and "reserved" in hijack.text
            deleted = app.http.delete(f"/api/sessions/{session_id}", headers=bob)
            assert deleted.status_code == 404 and deleted.json()["code"] == "session_not_found"
        assert app.http.delete(f"/api/sessions/{ledger}", headers=callers.headers(ALICE)).status_code == 404

        again = app.http.post("/api/agents/payer/runs", json=body, headers=alice)
        assert again.status_code == 200 and again.json()["run_id"] == first.json()["run_id"]
        assert len(app.store_call(lambda store: store.list_owner_runs(ALICE.id)).items) == 1
        assert app.store_call(lambda store: store.list_owner_runs(BOB.id)).items == []


def test_workflow_control_sessions_are_reserved_too(app_in, model) -> None:
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("easyauth") as (app, callers):
        alice = callers.headers(ALICE)
        started = app.http.post("/api/workflows/publish_flow/runs", json={"input": {"title": "T"}}, headers=alice)
        assert started.status_code == 202, started.text
        control = f"wf-{started.json()['run_id']}"
        # Not even the owner can start a run that would write into the workflow's journal, or delete it.
        into = app.http.post("/api/agents/payer/runs", json={"input": "x", "session_id": control}, headers=alice)
        assert into.status_code == 422 and into.json()["field"] == "body.session_id"
        assert app.http.delete(f"/api/sessions/{control}", headers=alice).status_code == 404
        assert app.http.get(f"/api/sessions/{control}", headers=alice).status_code == 404


def test_the_sessions_of_a_workflows_child_runs_cannot_be_created_by_a_client(app_in, model) -> None:
    """Bob learns Alice's workflow run id (e.g. from a gate in his inbox): he cannot take the session its next
    step's child run will use, so the step cannot be made to fail; Alice still reads her child runs' sessions."""
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("easyauth") as (app, callers):
        started = app.http.post(
            "/api/workflows/publish_flow/runs", json={"input": {"title": "T"}}, headers=callers.headers(ALICE)
        )
        assert started.status_code == 202, started.text
        for session_id in (f"{started.json()['run_id']}.write", f"{started.json()['run_id'].upper()}.later"):
            taken = app.http.post("/api/agents/payer/runs", json={"input": "x", "session_id": session_id},
                                  headers=callers.headers(BOB))
            assert taken.status_code == 422 and taken.json()["field"] == "body.session_id", taken.text
        ordinary = app.http.post(  # an ordinary dotted id is still a client's to choose
            "/api/agents/payer/runs", json={"input": "x", "session_id": "ab.cd"}, headers=callers.headers(BOB)
        )
        assert ordinary.json()["session_id"] == "ab.cd"
