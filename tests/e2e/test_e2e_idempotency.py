"""`Idempotency-Key` on a start whose store write landed but failed all the same (an error after the store took it,
or its answer lost): the run written is the request's run, started as if the write had answered, and a retry with
the same key answers with it; the key never starts a second run, even when the store cannot even say whether the run
was written. On both stores, over real HTTP."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from e2e_harness import InProcessApp
from e2e_settings import watches_the_app_in_process

from agent_runtime.approvers import ANONYMOUS
from scripted_model import Script, ScriptedModelServer


class AnswerLost(ConnectionError):
    """What the store's client raised after the store took the write."""


def owner_runs(app: InProcessApp) -> set[str]:
    return {r.run_id for r in app.store_call(lambda s: s.list_owner_runs(ANONYMOUS, limit=100)).items}


def start_with_a_lost_write(
    app: InProcessApp, monkeypatch: pytest.MonkeyPatch, body: dict[str, Any], headers: dict[str, str], *,
    read_fails: bool = False,
) -> tuple[httpx.Response, str]:
    """A start whose write of its run lands and then raises (and, `read_fails`, whose reads of runs fail after it):
    its answer, and the id of the run it wrote."""
    store = app.services().current().store
    begin_run, get_run = store.begin_run, store.get_run
    written: list[str] = []

    async def written_then_lost(*args: Any, **kwargs: Any) -> Any:
        run = await begin_run(*args, **kwargs)
        written.append(run.run_id)
        raise AnswerLost("the store took the run; its answer was lost")

    async def unreadable_after_the_write(*args: Any, **kwargs: Any) -> Any:
        if written:
            raise AnswerLost("the store is unreachable")
        return await get_run(*args, **kwargs)

    monkeypatch.setattr(store, "begin_run", written_then_lost)
    if read_fails:
        monkeypatch.setattr(store, "get_run", unreadable_after_the_write)
    first = app.http.post("/api/agents/helper/runs", json=body, headers=headers)
    monkeypatch.undo()
    assert len(written) == 1, first.text
    return first, written[0]


def keyed_start(named_session: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """A start's body and a key of its own (one Cosmos database serves the whole module)."""
    body = {"input": "Say hello", **({"session_id": uuid.uuid4().hex} if named_session else {})}
    return body, {"Idempotency-Key": f"order-{uuid.uuid4().hex}"}


@watches_the_app_in_process  # wraps the app's own store
@pytest.mark.parametrize("named_session", [False, True], ids=["new-session", "named-session"])
def test_a_start_whose_run_was_written_before_it_failed_makes_one_run(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, named_session: bool
) -> None:
    model.set_script(Script.of("Hello there."))
    body, headers = keyed_start(named_session)
    runs_before = owner_runs(app)
    first, run_id = start_with_a_lost_write(app, monkeypatch, body, headers)
    app.settle()
    again = app.http.post("/api/agents/helper/runs", json=body, headers=headers)

    assert (again.status_code, again.json().get("run_id")) == (200, run_id), again.text  # the run written, no other
    assert owner_runs(app) - runs_before == {run_id}
    assert (first.status_code, first.json()["run_id"]) == (202, run_id), first.text  # started as if it had answered
    assert again.json()["status"] == "completed" and again.json()["output"]["text"] == "Hello there."
    assert len(model.log.requests) == 1


@watches_the_app_in_process  # wraps the app's own store
def test_a_start_that_cannot_tell_whether_its_run_was_written_keeps_its_key(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its error stands, and the key stays with the run id it claimed: a retry answers with the run written."""
    model.set_script(Script.of("Hello there."))
    body, headers = keyed_start(named_session=True)
    runs_before = owner_runs(app)
    first, run_id = start_with_a_lost_write(app, monkeypatch, body, headers, read_fails=True)
    assert first.status_code >= 500, first.text
    again = app.http.post("/api/agents/helper/runs", json=body, headers=headers)
    assert again.json().get("run_id") == run_id, again.text
    assert owner_runs(app) - runs_before == {run_id}
