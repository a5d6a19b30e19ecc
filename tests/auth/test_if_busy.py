"""`if_busy` on a run start in a busy session: `reject` (409), `enqueue` (queued runs start in order when the
active one ends, also across a host kill), `interrupt` (the active run is cancelled, the new one then runs)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from auth_people import ALICE, AUTH_DIR, app_env, easyauth_headers
from e2e_harness import PROGRESS_TIMEOUT_S, AppClient
from e2e_settings import watches_the_app_in_process

from devhost.testing import SubprocessHost
from scripted_model import Reply, Script
from scripted_model.script import Match, Rule

REPO_ROOT = AUTH_DIR.parent.parent
FINAL = {"completed", "failed", "cancelled"}


def script() -> Script:
    return Script(
        rules=[
            Rule(match=Match(last_user="note", after_tool_results=False), reply=Reply.call("note", {"text": "x"})),
            Rule(match=Match(last_user="second"), reply=Reply(text="Two.")),
            Rule(match=Match(last_user="third"), reply=Reply(text="Three.")),
            Rule(match=Match(after_tool_results=True), reply=Reply(text="Noted.")),
        ],
        default=Reply(text="Hi."),
    )


def _start(http, headers, text: str, **body) -> dict:
    response = http.post("/api/agents/payer/runs", json={"input": text, "session_id": "s1", **body}, headers=headers)
    assert response.status_code in (200, 202), response.text
    return response.json()


def _texts(http, headers) -> list[str]:
    page = http.get("/api/sessions/s1/messages", params={"limit": 200}, headers=headers).json()
    return [c.get("text") for m in page["messages"] for c in m["contents"] if c["type"] == "text"]


@pytest.mark.parametrize("store", ["sqlite", pytest.param("cosmos", marks=pytest.mark.cosmos)])
def test_enqueued_runs_start_in_order_when_the_active_one_ends(app_in, model, store: str) -> None:
    model.set_script(script())
    with app_in("easyauth", store) as (app, callers):
        alice = callers.headers(ALICE)
        first = _start(app.http, alice, "note please")
        app.settle()
        busy = app.http.post("/api/agents/payer/runs", json={"input": "x", "session_id": "s1"}, headers=alice)
        assert busy.status_code == 409 and busy.json()["code"] == "session_busy"  # reject stays the default
        second = _start(app.http, alice, "second", if_busy="enqueue")
        third = _start(app.http, alice, "third", if_busy="enqueue")
        assert (second["status"], third["status"]) == ("queued", "queued")
        app.advance(30)  # queued runs wait however long the active one takes
        assert app.http.get(f"/api/runs/{second['run_id']}", headers=alice).json()["status"] == "queued"
        assert "second" not in _texts(app.http, alice)  # a queued input is not part of the conversation yet

        [approval] = app.http.get(f"/api/runs/{first['run_id']}", headers=alice).json()["pending_approvals"]
        decided = app.http.post(f"/api/runs/{first['run_id']}/approvals/{approval['approval_id']}",
                                json={"decision": "approve"}, headers=alice)
        assert decided.status_code == 202
        for _ in range(20):
            app.advance(10)
            views = [app.http.get(f"/api/runs/{r['run_id']}", headers=alice).json() for r in (second, third)]
            if all(v["status"] in FINAL for v in views):
                break
        assert [v["status"] for v in views] == ["completed", "completed"]
        assert [v["output"]["text"] for v in views] == ["Two.", "Three."]
        assert _texts(app.http, alice) == ["note please", "Noted.", "second", "Two.", "third", "Three."]
        runs = app.store_call(lambda store: store.list_runs("s1"))
        assert [(r.run_id, r.ordinal) for r in runs] == [
            (first["run_id"], 1), (second["run_id"], 2), (third["run_id"], 3)]


def test_a_queued_run_can_be_cancelled_and_leaves_the_queue(app_in, model) -> None:
    model.set_script(script())
    with app_in("easyauth") as (app, callers):
        alice = callers.headers(ALICE)
        first = _start(app.http, alice, "note please")
        app.settle()
        second = _start(app.http, alice, "second", if_busy="enqueue")
        third = _start(app.http, alice, "third", if_busy="enqueue")
        assert app.http.post(f"/api/runs/{second['run_id']}/cancel", headers=alice).status_code == 202
        app.advance(10)
        assert app.http.get(f"/api/runs/{second['run_id']}", headers=alice).json()["status"] == "cancelled"
        assert app.store_call(lambda store: store.get_session("s1")).queued_run_ids == [third["run_id"]]
        assert app.http.post(f"/api/runs/{first['run_id']}/cancel", headers=alice).status_code == 202
        for _ in range(20):
            app.advance(10)
            view = app.http.get(f"/api/runs/{third['run_id']}", headers=alice).json()
            if view["status"] in FINAL:
                break
        assert (view["status"], view["output"]["text"]) == ("completed", "Three.")


def test_interrupt_cancels_the_active_run_then_starts(app_in, model) -> None:
    model.set_script(script())
    with app_in("easyauth") as (app, callers):
        alice = callers.headers(ALICE)
        first = _start(app.http, alice, "note please")
        app.settle()
        urgent = _start(app.http, alice, "second", if_busy="interrupt")
        assert urgent["status"] == "queued"
        assert_interrupted(app, alice, first, urgent)


def assert_interrupted(app: Any, headers: dict[str, str], first: dict[str, Any], urgent: dict[str, Any]) -> None:
    """The interrupted run ends cancelled and the urgent one, queued behind it, then runs to its answer."""
    for _ in range(20):
        app.advance(10)
        views = [app.http.get(f"/api/runs/{r['run_id']}", headers=headers) for r in (first, urgent)]
        if all(v.json()["status"] in FINAL for v in views):
            break
    assert [v.json()["status"] for v in views] == ["cancelled", "completed"]
    assert views[1].json()["output"]["text"] == "Two."

@pytest.mark.slow
def test_queued_runs_survive_a_host_kill_and_keep_their_order(model, tmp_path: Path) -> None:
    model.set_script(script())
    env = app_env(model.base_url, AUTH_MODE="easyauth", SESSION_STORE_PATH=str(tmp_path / "sessions.sqlite3"))
    # The real clock: queued runs poll every few seconds; auto-skip would also skip the approval deadline.
    host = SubprocessHost(REPO_ROOT, state_path=tmp_path / "devhost.sqlite3", env=env)
    alice = easyauth_headers(ALICE)
    host.start()
    try:
        api = AppClient(host.client)
        first = _start(api.http, alice, "note please")
        deadline = time.monotonic() + PROGRESS_TIMEOUT_S
        while True:
            view = api.http.get(f"/api/runs/{first['run_id']}", headers=alice).json()
            if view["status"] == "requires_action":
                break
            assert time.monotonic() < deadline, view
            time.sleep(0.05)  # a child process: no engine to settle from here
        second = _start(api.http, alice, "second", if_busy="enqueue")
        third = _start(api.http, alice, "third", if_busy="enqueue")

        host.kill()
        host.start()

        [approval] = api.http.get(f"/api/runs/{first['run_id']}", headers=alice).json()["pending_approvals"]
        assert api.http.post(f"/api/runs/{first['run_id']}/approvals/{approval['approval_id']}",
                             json={"decision": "approve"}, headers=alice).status_code == 202
        while True:
            views = [api.http.get(f"/api/runs/{r['run_id']}", params={"wait_seconds": 1}, headers=alice).json()
                     for r in (second, third)]
            if all(v["status"] in FINAL for v in views):
                break
            assert time.monotonic() < deadline + PROGRESS_TIMEOUT_S, views
        assert [v["output"]["text"] for v in views] == ["Two.", "Three."]
        assert _texts(api.http, alice) == ["note please", "Noted.", "second", "Two.", "third", "Three."]
    finally:
        host.close()


@watches_the_app_in_process  # makes the app's own gateway fail once, in this process
def test_a_repeated_interrupt_whose_cancel_failed_interrupts_again(app_in, model) -> None:
    """The first `interrupt` request queued its run, then raising the cancel event failed (500): the client's retry
    with the same `Idempotency-Key` answered with the queued run and never cancelled the active one, so the new run
    waited behind a run that was waiting for a person."""
    model.set_script(script())
    with app_in("easyauth") as (app, callers):
        alice = callers.headers(ALICE)
        first = _start(app.http, alice, "note please")
        app.settle()
        gateway = app.app_module("http_api.durable_gateway").DurableGateway
        send_cancel = gateway.send_cancel
        failures = []

        async def failing_once(self, run_id: str, reason: str | None) -> None:
            if not failures:
                failures.append(run_id)
                raise RuntimeError("the task hub did not take the event")
            await send_cancel(self, run_id, reason)

        gateway.send_cancel = failing_once
        try:
            body = {"input": "second", "session_id": "s1", "if_busy": "interrupt"}
            keyed = {**alice, "Idempotency-Key": "urgent-1"}
            failed = app.http.post("/api/agents/payer/runs", json=body, headers=keyed)
            assert failed.status_code >= 500 and failures == [first["run_id"]], failed.text
            retry = app.http.post("/api/agents/payer/runs", json=body, headers=keyed)
        finally:
            gateway.send_cancel = send_cancel
        assert retry.status_code == 202, retry.text
        urgent = retry.json()
        assert_interrupted(app, alice, first, urgent)
