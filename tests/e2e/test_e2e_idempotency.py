"""`Idempotency-Key` on a start whose store write landed but failed all the same (an error after the store took it,
or its answer lost): the run written is the request's run, started as if the write had answered, and a retry with
the same key answers with it; the key never starts a second run. On both stores, over real HTTP."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from e2e_harness import InProcessApp
from e2e_settings import watches_the_app_in_process

from agent_runtime.approvers import ANONYMOUS
from scripted_model import Script, ScriptedModelServer


class AnswerLost(ConnectionError):
    """What the store's client raised after the store took the write."""


def owner_runs(app: InProcessApp) -> set[str]:
    return {r.run_id for r in app.store_call(lambda s: s.list_owner_runs(ANONYMOUS, limit=100)).items}


@watches_the_app_in_process  # wraps the app's own store
@pytest.mark.parametrize("named_session", [False, True], ids=["new-session", "named-session"])
def test_a_start_whose_run_was_written_before_it_failed_makes_one_run(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, named_session: bool
) -> None:
    model.set_script(Script.of("Hello there."))
    store = app.services().current().store
    begin_run = store.begin_run
    written: list[str] = []

    async def written_then_lost(*args: Any, **kwargs: Any) -> Any:
        run = await begin_run(*args, **kwargs)
        written.append(run.run_id)
        raise AnswerLost("the store took the run; its answer was lost")

    runs_before = owner_runs(app)  # one Cosmos database serves the module: its earlier tests' runs
    monkeypatch.setattr(store, "begin_run", written_then_lost)
    headers = {"Idempotency-Key": f"order-{uuid.uuid4().hex}"}  # a Cosmos database serves the whole module
    body = {"input": "Say hello", **({"session_id": uuid.uuid4().hex} if named_session else {})}
    first = app.http.post("/api/agents/helper/runs", json=body, headers=headers)
    monkeypatch.undo()
    app.settle()
    again = app.http.post("/api/agents/helper/runs", json=body, headers=headers)

    assert len(written) == 1, first.text
    run_id = written[0]
    assert (again.status_code, again.json()["run_id"]) == (200, run_id), again.text  # the run written, no other
    assert owner_runs(app) - runs_before == {run_id}
    assert (first.status_code, first.json()["run_id"]) == (202, run_id), first.text  # started as if it had answered
    assert again.json()["status"] == "completed" and again.json()["output"]["text"] == "Hello there."
    assert len(model.log.requests) == 1
