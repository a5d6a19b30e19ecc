"""Deleting a session: everything in the store goes, and so does the Durable history of its runs; an active run
makes it 409 unless `?cancel=true` (which terminates the run first)."""

from __future__ import annotations

from auth_people import ALICE

from scripted_model import Reply, Script
from scripted_model.script import Match, Rule


def _script() -> Script:
    return Script(
        rules=[Rule(match=Match(last_user="note", after_tool_results=False), reply=Reply.call("note", {"text": "x"}))],
        default=Reply(text="Hi."),
    )


def _instance(app, run_id: str):
    return app.host.run(app.host.engine.get_status(run_id))


def test_delete_purges_the_durable_history_of_finished_runs(app_in, model) -> None:
    model.set_script(_script())
    with app_in("easyauth") as (app, callers):
        alice = callers.headers(ALICE)
        runs = []
        for text in ("hello", "again"):
            started = app.http.post("/api/agents/payer/runs", json={"input": text, "session_id": "s1"}, headers=alice)
            runs.append(started.json()["run_id"])
            app.settle()
        assert all(_instance(app, run_id) is not None for run_id in runs)

        assert app.http.delete("/api/sessions/s1", headers=alice).status_code == 204
        assert all(_instance(app, run_id) is None for run_id in runs)
        assert app.store_call(lambda store: store.get_session("s1")) is None
        assert app.http.get(f"/api/runs/{runs[0]}", headers=alice).status_code == 404


def test_an_active_run_blocks_the_delete_unless_cancel_is_asked(app_in, model) -> None:
    model.set_script(_script())
    with app_in("easyauth") as (app, callers):
        alice = callers.headers(ALICE)
        started = app.http.post("/api/agents/payer/runs", json={"input": "note it", "session_id": "s1"},
                                headers=alice).json()
        app.settle()
        busy = app.http.delete("/api/sessions/s1", headers=alice)
        assert busy.status_code == 409 and busy.json()["code"] == "session_busy"
        assert busy.json()["active_run_id"] == started["run_id"]
        assert app.http.delete("/api/sessions/s1", params={"cancel": "maybe"}, headers=alice).status_code == 422

        assert app.http.delete("/api/sessions/s1", params={"cancel": "true"}, headers=alice).status_code == 204
        app.settle()
        assert _instance(app, started["run_id"]) is None  # terminated, then purged
        assert app.store_call(lambda store: store.get_session("s1")) is None
        assert app.store_call(lambda store: store.get_run(started["run_id"])) is None
        assert app.http.get("/api/sessions", headers=alice).json()["sessions"] == []
