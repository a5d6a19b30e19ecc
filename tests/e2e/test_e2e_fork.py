"""Fork: a new session with the conversation before a run, and a run there; the original is untouched. Both
stores."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from e2e_harness import InProcessApp
from e2e_settings import watches_the_app_in_process
from lost_writes import run_items_late, run_writes_late, run_writes_lost

from agent_runtime.approvers import ANONYMOUS
from scripted_model import Match, Reply, Rule, Script, ScriptedModelServer, ScriptedToolCall

ECHO = Script(rules=[Rule(match=Match(last_user="(?s).*"), reply=Reply.say("noted"))])


def texts(messages: list[dict]) -> list[str]:
    return [c.get("text", "") for m in messages for c in m["contents"] if c.get("type") == "text"]


def conversation(app: InProcessApp, model: ScriptedModelServer) -> tuple[str, list[str]]:
    """A session with three finished runs ("one", "two", "three"); returns it and its run ids."""
    model.set_script(ECHO)
    session_id = None
    run_ids = []
    for word in ("one", "two", "three"):
        started = app.start(input=word, **({"session_id": session_id} if session_id else {}))
        session_id = started["session_id"]
        app.settle()
        assert app.view(started["run_id"])["status"] == "completed"
        run_ids.append(started["run_id"])
    return session_id, run_ids


def test_a_fork_continues_from_before_the_run_with_a_new_input_and_leaves_the_original_alone(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    session_id, (_, second, _) = conversation(app, model)
    original = app.session_messages(session_id)

    forked = app.http.post(f"/api/runs/{second}/fork", json={"input": "two, but different", "wait_seconds": 10})
    assert forked.status_code == 200, forked.text
    run = forked.json()
    assert run["status"] == "completed" and run["session_id"] != session_id and run["run_id"] != second
    # What the model saw: the conversation up to, not including, the forked run's input, then the new input.
    sent = [m.get("content") for m in model.log.last.body["messages"] if m["role"] == "user"]
    assert sent == ["one", "two, but different"]
    assert texts(app.session_messages(run["session_id"])) == ["one", "noted", "two, but different", "noted"]

    view = app.http.get(f"/api/sessions/{run['session_id']}").json()
    assert view["forked_from"]["session_id"] == session_id and view["forked_from"]["run_id"] == second
    assert view["run_count"] == 1 and [r["run_id"] for r in view["runs"]] == [run["run_id"]]
    assert app.session_messages(session_id) == original  # untouched

    # Both sessions go on, each with its own story.
    for sid, word in ((session_id, "four"), (run["session_id"], "three, elsewhere")):
        started = app.start(input=word, session_id=sid)
        app.settle()
        assert app.view(started["run_id"])["status"] == "completed"
    assert texts(app.session_messages(session_id))[-2:] == ["four", "noted"]
    assert texts(app.session_messages(run["session_id"])) == [
        "one", "noted", "two, but different", "noted", "three, elsewhere", "noted"
    ]


def test_a_fork_without_input_asks_again_and_a_fork_of_a_fork_keeps_the_story(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    _session_id, (first, _, third) = conversation(app, model)
    again = app.http.post(f"/api/runs/{third}/fork", json={"wait_seconds": 10}).json()
    assert texts(app.session_messages(again["session_id"])) == ["one", "noted", "two", "noted", "three", "noted"]
    deeper = app.http.post(f"/api/runs/{again['run_id']}/fork", json={"input": "3", "wait_seconds": 10}).json()
    assert deeper["status"] == "completed"
    assert texts(app.session_messages(deeper["session_id"])) == ["one", "noted", "two", "noted", "3", "noted"]
    # Forking the first run: nothing before it.
    fresh = app.http.post(f"/api/runs/{first}/fork", json={"input": "zero", "wait_seconds": 10}).json()
    assert texts(app.session_messages(fresh["session_id"])) == ["zero", "noted"]


def test_fork_refuses_what_it_cannot_do(app: InProcessApp, model: ScriptedModelServer) -> None:
    _session_id, (first, _, _) = conversation(app, model)
    assert app.http.post("/api/runs/nosuchrun/fork", json={}).status_code == 404
    bad = app.http.post(f"/api/runs/{first}/fork", json={"input": ""})
    assert bad.status_code == 422 and bad.json()["invalid_params"][0]["field"].startswith("body.input")
    assert app.http.post(f"/api/runs/{first}/fork", json={"nope": 1}).status_code == 422


def test_the_same_fork_request_with_an_idempotency_key_starts_one_run(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    _, (_, second, _) = conversation(app, model)
    headers = {"Idempotency-Key": "fork-once"}
    first = app.http.post(f"/api/runs/{second}/fork", json={"input": "x", "wait_seconds": 10}, headers=headers)
    again = app.http.post(f"/api/runs/{second}/fork", json={"input": "x", "wait_seconds": 10}, headers=headers)
    assert first.json()["run_id"] == again.json()["run_id"]
    assert first.json()["session_id"] == again.json()["session_id"]


def test_a_fork_input_must_ask_something_as_a_starts_must(app: InProcessApp, model: ScriptedModelServer) -> None:
    """A blank input, or messages without a user one, are a 422 on a start; a fork took them and ran the model on a
    conversation that asked nothing."""
    _session_id, (first, _, _) = conversation(app, model)
    calls_before = model.log.total
    for bad in ("   ", [{"role": "assistant", "content": "I will do it."}]):
        refused = app.http.post(f"/api/runs/{first}/fork", json={"input": bad, "wait_seconds": 10})
        assert refused.status_code == 422, refused.text
        assert refused.json()["invalid_params"][0]["field"].startswith("body.input")
    assert model.log.total == calls_before


def test_a_fork_runs_with_the_runs_own_instructions(app: InProcessApp, model: ScriptedModelServer) -> None:
    """A run started with instructions of its own (a Responses request's) is forked with them: the fork is the run
    again, not the bare agent."""
    model.set_script(ECHO)
    created = app.http.post("/api/v1/responses", json={"model": "helper", "input": "one", "instructions": "Be terse."})
    assert created.status_code == 200, created.text
    run_id = created.json()["id"].removeprefix("resp_").split("_")[0]
    system = [m["content"] for m in model.log.last.messages if m["role"] == "system"]

    forked = app.http.post(f"/api/runs/{run_id}/fork", json={"input": "one, again", "wait_seconds": 10})
    assert forked.status_code == 200, forked.text
    assert [m["content"] for m in model.log.last.messages if m["role"] == "system"] == system
    assert "Be terse." in system[0]


@watches_the_app_in_process  # (makes the app's store fail: the app must run in this process)
def test_a_fork_whose_copy_fails_does_not_burn_its_idempotency_key(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The conversation's copy failed (a store error) after the key was claimed and before the run existed: the key
    was never released, so the client's retry got 409 `idempotency_key_busy` for the rest of the key's 24 hours."""
    _, (_, second, _) = conversation(app, model)
    store = app.services().current().store
    append = store.append_messages
    failures = []

    async def failing_once(session_id: str, records: list) -> object:
        if not failures:
            failures.append(session_id)
            raise RuntimeError("the store failed the copy")
        return await append(session_id, records)

    store.append_messages = failing_once
    try:
        headers = {"Idempotency-Key": "fork-retry"}
        body = {"input": "x", "wait_seconds": 10}
        first = app.http.post(f"/api/runs/{second}/fork", json=body, headers=headers)
        assert first.status_code >= 500 and failures, first.text
        retry = app.http.post(f"/api/runs/{second}/fork", json=body, headers=headers)
    finally:
        del store.append_messages
    assert retry.status_code == 200, retry.text
    assert retry.json()["status"] == "completed"
    assert forks_of(app, second) == [retry.json()["session_id"]]  # the failed copy went with its failure


def forks_of(app: InProcessApp, run_id: str) -> list[str]:
    """The sessions in the store forked from `run_id`."""
    sessions = app.snapshot().sessions
    return [sid for sid, s in sessions.items() if (s["session"]["forked_from"] or {}).get("run_id") == run_id]


@watches_the_app_in_process  # makes the app's store refuse the fork's run
def test_a_fork_whose_run_cannot_be_written_leaves_no_copy_behind(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The conversation was copied, then the store refused the fork's run (provably unwritten): the client got an
    error, and the copy stayed - a session with the conversation and no run in the caller's listings, one more with
    each retry. Now the copy goes with the failure; a retry, with the key or without one, makes the one fork."""
    session_id, (_, second, _) = conversation(app, model)
    store = app.services().current().store

    async def refused(*args: object, **kwargs: object) -> object:
        raise RuntimeError("the store refused the run")

    headers = {"Idempotency-Key": f"fork-{uuid.uuid4().hex}"}
    body = {"input": "two, again", "wait_seconds": 10}
    with monkeypatch.context() as patch:
        patch.setattr(store, "begin_run", refused)
        keyed = app.http.post(f"/api/runs/{second}/fork", json=body, headers=headers)
        unkeyed = app.http.post(f"/api/runs/{second}/fork", json=body)
    assert keyed.status_code >= 500 and unkeyed.status_code >= 500, (keyed.text, unkeyed.text)
    assert forks_of(app, second) == []
    listed = app.http.get("/api/sessions").json()["sessions"]
    assert session_id in [s["session_id"] for s in listed] and all(s["run_count"] > 0 for s in listed), listed

    retry = app.http.post(f"/api/runs/{second}/fork", json=body, headers=headers)
    assert retry.status_code == 200 and retry.json()["status"] == "completed", retry.text
    assert forks_of(app, second) == [retry.json()["session_id"]]
    assert texts(app.session_messages(retry.json()["session_id"])) == ["one", "noted", "two, again", "noted"]


@watches_the_app_in_process  # wraps the app's own store (or its runs container)
@pytest.mark.parametrize("late", ["begin_run", "run_item"])
def test_a_fork_whose_run_write_lands_after_it_failed_leaves_no_run_without_its_session(
    app: InProcessApp, model: ScriptedModelServer, late: str
) -> None:
    """The store's answer came before its write: the fork read its run absent, deleted its copy and released its key,
    and then the run's write landed - in the deleted copy (Cosmos: the run item after the claim), a run in progress
    without its session, listed among the caller's runs for good. Now the fork closes its run in the run's place
    before and after deleting the copy: the late write lands nothing, and a retry makes the one fork."""
    if late == "run_item" and app.store_backend != "cosmos":
        pytest.skip("a Cosmos store writes the claim and the run apart")
    _, (_, second, _) = conversation(app, model)
    headers = {"Idempotency-Key": f"fork-{uuid.uuid4().hex}"}
    body = {"input": "two, again", "wait_seconds": 10}
    with (run_writes_late if late == "begin_run" else run_items_late)(app) as on_their_way:
        first = app.http.post(f"/api/runs/{second}/fork", json=body, headers=headers)
    assert first.status_code >= 500 and len(on_their_way) == 1, first.text
    assert forks_of(app, second) == []

    async def land() -> object:
        try:
            return await on_their_way[0]()
        except Exception as error:  # the copy is gone: a late begin_run may find no session
            return error

    app.store_call(lambda _store: land())
    retry = app.http.post(f"/api/runs/{second}/fork", json=body, headers=headers)
    assert retry.status_code == 200 and retry.json()["status"] == "completed", retry.text
    assert forks_of(app, second) == [retry.json()["session_id"]]
    owned = app.store_call(lambda store: store.list_owner_runs(ANONYMOUS, limit=100)).items
    assert [r.run_id for r in owned if not r.finished] == [], owned  # no run left open, with or without a session


@watches_the_app_in_process  # wraps the app's own store, and ages its key's claim
def test_a_fork_retry_starts_the_run_its_first_request_wrote_but_never_started(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first request copied the conversation, wrote its run and failed unable to tell whether it had (the run
    has no orchestration). A retry with its key answered with that run forever, never started; once the first request
    is surely over, a retry starts it in the session already copied (the conversation copied once, the input once)."""
    session_id, (_, second, _) = conversation(app, model)
    headers = {"Idempotency-Key": f"fork-{uuid.uuid4().hex}"}
    body = {"input": "two, again"}
    with run_writes_lost(app, read_fails=True) as written:
        first = app.http.post(f"/api/runs/{second}/fork", json=body, headers=headers)
    assert first.status_code >= 500 and len(written) == 1, first.text
    [run_id] = written
    early = app.http.post(f"/api/runs/{second}/fork", json=body, headers=headers)
    assert early.json()["run_id"] == run_id, early.text
    app.settle()
    calls = model.log.total  # the first request may still be on its way to start it: nobody else does

    monkeypatch.setattr(app.app_module("http_api.idempotency"), "ABANDONED_AFTER", timedelta(0))
    retry = app.http.post(f"/api/runs/{second}/fork", json={**body, "wait_seconds": 10}, headers=headers)
    assert retry.status_code == 200, retry.text
    assert (retry.json()["run_id"], retry.json()["status"]) == (run_id, "completed"), retry.text
    assert model.log.total == calls + 1
    sessions = app.snapshot().sessions
    forks = [sid for sid, s in sessions.items() if (s["session"]["forked_from"] or {}).get("run_id") == second]
    assert forks == [retry.json()["session_id"]]  # one copy
    assert texts(app.session_messages(retry.json()["session_id"])) == ["one", "noted", "two, again", "noted"]
    assert session_id != retry.json()["session_id"]


@watches_the_app_in_process  # stops the app's own store mid-fork, and ages its key's claim
def test_a_fork_killed_after_copying_leaves_no_copy_once_its_key_is_retried(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first request copied the conversation and died before its run was written (what a killed process leaves:
    the copy, the key's claim, no run, nothing cleared up). Its key's retry, once that request is surely over, forked
    afresh and the dead request's copy stayed for good in the caller's listings, a session without its run. Now the
    copy is named after the fork's run, and the retry that gives up the dead claim deletes it first: one fork."""
    _, (_, second, _) = conversation(app, model)
    store = app.services().current().store
    headers = {"Idempotency-Key": f"fork-{uuid.uuid4().hex}"}
    body = {"input": "two, again", "wait_seconds": 10}

    async def killed(*args: object, **kwargs: object) -> object:
        raise RuntimeError("the host died")

    with monkeypatch.context() as patch:  # nothing after the copy happens: neither the run nor any clearing up
        patch.setattr(store, "begin_run", killed)
        patch.setattr(store, "close_unwritten_start", killed)
        first = app.http.post(f"/api/runs/{second}/fork", json=body, headers=headers)
    assert first.status_code >= 500, first.text
    assert len(forks_of(app, second)) == 1  # the dead request's copy

    monkeypatch.setattr(app.app_module("http_api.idempotency"), "ABANDONED_AFTER", timedelta(0))
    retry = app.http.post(f"/api/runs/{second}/fork", json=body, headers=headers)
    assert retry.status_code == 200 and retry.json()["status"] == "completed", retry.text
    assert forks_of(app, second) == [retry.json()["session_id"]]
    assert texts(app.session_messages(retry.json()["session_id"])) == ["one", "noted", "two, again", "noted"]


def _lookup(key: str) -> Reply:
    return Reply(text=f"Looking up {key}.", tool_calls=[ScriptedToolCall(name="lookup", arguments={"key": key})])


def test_a_fork_takes_a_budget_as_a_start_does(app: InProcessApp, model: ScriptedModelServer) -> None:
    """A fork is a start: it takes `budget`, within the agent's limits (422 naming the field above them, before
    anything is copied); without one it runs with the agent's. It took none: a fork could not be limited below the
    agent's budget."""
    model.set_script(Script.of(_lookup("a"), "Done."))
    source = app.start(agent="frugal", input="look up a")
    app.settle()
    assert app.view(source["run_id"])["status"] == "completed"
    sessions = len(app.snapshot().sessions)

    above = app.http.post(f"/api/runs/{source['run_id']}/fork", json={"budget": {"max_model_calls": 4}})
    assert above.status_code == 422, above.text
    assert (above.json()["code"], above.json()["field"]) == ("budget_above_agent_limit", "body.budget.max_model_calls")
    assert len(app.snapshot().sessions) == sessions  # nothing copied, nothing started

    model.set_script(Script.of(_lookup("b"), _lookup("c"), "Done again."))
    limited = app.http.post(
        f"/api/runs/{source['run_id']}/fork", json={"budget": {"max_model_calls": 1}, "wait_seconds": 10}
    ).json()
    assert (limited["status"], limited["finish_reason"]) == ("completed", "budget_exceeded")
    assert limited["output"]["text"] == "Looking up b."


def test_a_fork_of_a_workflow_child_run_is_a_run_of_its_own(app: InProcessApp, model: ScriptedModelServer) -> None:
    """A workflow's child run says so in its metadata (`workflow_run_id`, `workflow_step`); its fork, in a session of
    the caller's, is no step of that workflow. The rest of the metadata is kept."""
    model.set_script(ECHO)
    metadata = {"workflow_run_id": "wf-1", "workflow_step": "draft", "ticket": "T-42"}
    source = app.start(input="one", metadata=metadata)
    app.settle()
    fork = app.http.post(f"/api/runs/{source['run_id']}/fork", json={"wait_seconds": 10}).json()
    assert fork["status"] == "completed"
    record = app.store_call(lambda store: store.get_run(fork["run_id"]))
    assert record.metadata == {"ticket": "T-42"}
