"""The OpenAI Responses API (`/api/v1/responses`) driven by the official `openai` client (sync and async) against
the app on devhost: plain, background + retrieve, cancel, delete, input items, `previous_response_id` (and branching
from an earlier response), approvals answered with `mcp_approval_response` (the same durable run continues; the tool
ran once), structured output, and errors in OpenAI's shape."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from e2e_harness import PROGRESS_TIMEOUT_S, InProcessApp, until_completed, wait_for_file
from e2e_settings import watches_the_app_in_process
from never_started import stored_never_started as never_started
from openai import AsyncOpenAI, OpenAI
from openai.types.responses import Response
from pydantic import BaseModel
from test_e2e_crash import CrashableApp
from test_e2e_openai_responses_stream import check_events, deltas, read_until
from webhook_checks import host_revoked, host_unresolvable
from webhook_receiver import SECRET, WebhookReceiver

from agent_runtime.overrides import MAX_INSTRUCTIONS_CHARS
from scripted_model import Reply, Script, ScriptedModelServer, ScriptedToolCall

EMAIL_BOB = {"to": "bob@example.com", "subject": "Hi", "body": "Hello Bob"}
STREAMED_ANSWER = " ".join(f"part{i}" for i in range(40)) + "."


@pytest.fixture
def client(app: InProcessApp) -> Iterator[OpenAI]:
    http = httpx.Client(timeout=300, trust_env=False)
    with OpenAI(base_url=f"{app.host.base_url}/api/v1", api_key="unused", http_client=http, max_retries=0) as c:
        yield c


def async_client(app: InProcessApp) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=f"{app.host.base_url}/api/v1",
        api_key="unused",
        http_client=httpx.AsyncClient(timeout=300, trust_env=False),
        max_retries=0,
    )


def assert_official_shape(app: InProcessApp, response_id: str) -> None:
    """The raw JSON validates (strictly) as the official package's `Response` type, not only leniently."""
    raw = app.http.get(f"/api/v1/responses/{response_id}")
    assert raw.status_code == 200, raw.text
    Response.model_validate(raw.json())


def run_of(response_id: str) -> str:
    return response_id.removeprefix("resp_").split("_")[0]


def test_plain_response(app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), "The value is value-of-a."))
    response = client.responses.create(model="helper", input="What is a?", instructions="Answer briefly.")
    assert response.status == "completed"
    assert response.output_text == "The value is value-of-a."
    [call, message] = response.output
    assert (call.type, call.server_label, call.name, json.loads(call.arguments)) == (
        "mcp_call",
        "helper",
        "lookup",
        {"key": "a"},
    )
    assert json.loads(call.output or "") == {"key": "a", "value": "value-of-a"} and call.error is None
    assert (message.type, message.role, message.content[0].type) == ("message", "assistant", "output_text")
    assert response.usage is not None and response.usage.total_tokens > 0
    assert response.instructions == "Answer briefly."
    # The run's instructions were the agent's plus the response's own, for this run only.
    system = [m["content"] for m in model.log.last.messages if m["role"] == "system"]
    assert system == ["You are a test agent.\n\nAnswer briefly."]
    # The same run, through the run API.
    view = app.view(run_of(response.id))
    assert (view["status"], view["output"]["text"]) == ("completed", "The value is value-of-a.")
    assert client.responses.retrieve(response.id).output_text == response.output_text
    assert_official_shape(app, response.id)


def test_background_then_retrieve(app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    model.set_script(Script.of("Done in the background."))
    response = client.responses.create(model="helper", input="hi", background=True, metadata={"ticket": "T-1"})
    assert response.status in ("queued", "in_progress")
    assert response.background is True and response.metadata == {"ticket": "T-1"}
    app.settle()
    done = client.responses.retrieve(response.id)
    assert (done.status, done.output_text, done.metadata) == ("completed", "Done in the background.", {"ticket": "T-1"})


def test_previous_response_id_continues_the_session(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    model.set_script(Script.of("Hello Ann.", "Your name is Ann."))
    first = client.responses.create(model="helper", input="I am Ann.", instructions="Be warm.")
    second = client.responses.create(model="helper", input="Who am I?", previous_response_id=first.id)
    assert second.output_text == "Your name is Ann."
    assert second.previous_response_id == first.id
    sent = model.log.last.messages
    assert [m["content"] for m in sent if m["role"] in ("user", "assistant")] == [
        "I am Ann.",
        "Hello Ann.",
        "Who am I?",
    ]
    # `instructions` applied to the first response only.
    assert [m["content"] for m in sent if m["role"] == "system"] == ["You are a test agent."]
    assert app.view(run_of(second.id))["session_id"] == app.view(run_of(first.id))["session_id"]


def conversation(model: ScriptedModelServer) -> list[str]:
    """The user and assistant texts of the model's last request: the conversation the run had."""
    return [m["content"] for m in model.log.last.messages if m["role"] in ("user", "assistant")]


def session_of(app: InProcessApp, response_id: str) -> str:
    return str(app.view(run_of(response_id))["session_id"])


def session_ids(app: InProcessApp) -> set[str]:
    """The caller's newest sessions (a store shared by several tests keeps theirs): compare two to see new ones."""
    listed = app.http.get("/api/sessions", params={"limit": 100})
    assert listed.status_code == 200, listed.text
    return {s["session_id"] for s in listed.json()["sessions"]}


def texts(app: InProcessApp, session_id: str) -> list[str]:
    return [c["text"] for m in app.session_messages(session_id) for c in m["contents"] if c["type"] == "text"]


def test_previous_response_id_of_an_earlier_response_branches(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    """As in OpenAI's API, any stored response can be the previous one: continuing the first of two turns is a new
    conversation holding turn 1 and the new input (a branch); the original is untouched, and both go on."""
    model.set_script(Script.of("Hello Ann.", "Your name is Ann.", "Hello Bo.", "Your name is Bo.", "Still Ann."))
    first = client.responses.create(model="helper", input="I am Ann.")
    second = client.responses.create(model="helper", input="Who am I?", previous_response_id=first.id)
    original = session_of(app, first.id)

    with client.responses.create(model="helper", input="No, I am Bo.", previous_response_id=first.id,
                                 stream=True) as stream:
        events = list(stream)
    assert [e.type for e in events][-1] == "response.completed"
    branch = client.responses.retrieve(events[-1].response.id)
    assert (branch.status, branch.output_text, branch.previous_response_id) == ("completed", "Hello Bo.", first.id)
    assert conversation(model) == ["I am Ann.", "Hello Ann.", "No, I am Bo."]  # turn 1 + the new input only
    assert session_of(app, branch.id) != original
    assert branch.id == f"resp_{run_of(branch.id)}"
    [item] = client.responses.input_items.list(branch.id).data
    assert (item.type, item.role, [c.text for c in item.content]) == ("message", "user", ["No, I am Bo."])
    assert_official_shape(app, branch.id)
    session = app.http.get(f"/api/sessions/{session_of(app, branch.id)}").json()
    assert session["forked_from"]["session_id"] == original
    assert (session["forked_from"]["run_id"], session["forked_from"]["response_id"]) == (run_of(first.id), first.id)

    chained = client.responses.create(model="helper", input="Who am I?", previous_response_id=branch.id)
    assert (chained.output_text, chained.previous_response_id) == ("Your name is Bo.", branch.id)
    assert conversation(model) == ["I am Ann.", "Hello Ann.", "No, I am Bo.", "Hello Bo.", "Who am I?"]
    assert session_of(app, chained.id) == session_of(app, branch.id)

    # The original conversation is untouched, and goes on from its own latest response.
    assert texts(app, original) == ["I am Ann.", "Hello Ann.", "Who am I?", "Your name is Ann."]
    third = client.responses.create(model="helper", input="Sure?", previous_response_id=second.id)
    assert session_of(app, third.id) == original
    assert conversation(model) == ["I am Ann.", "Hello Ann.", "Who am I?", "Your name is Ann.", "Sure?"]


def test_a_branch_is_cancelled_and_deleted_as_any_response(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer, marker_dir: Path
) -> None:
    """A branch still running cannot be continued yet (409), is cancelled and deleted as any response: only its own
    conversation goes, the original stays."""
    model.set_script(Script.of("Hello Ann.", "Your name is Ann.", Reply.call("slow_step", {"label": "x"}), "never"))
    first = client.responses.create(model="helper", input="I am Ann.")
    second = client.responses.create(model="helper", input="Who am I?", previous_response_id=first.id)
    branch = client.responses.create(model="helper", input="Go slowly.", previous_response_id=first.id,
                                     background=True)
    wait_for_file(marker_dir / "slow_step.started")
    with pytest.raises(openai.ConflictError) as busy:
        client.responses.create(model="helper", input="And?", previous_response_id=branch.id)
    assert busy.value.code == "previous_response_in_progress"
    cancelling = client.responses.cancel(branch.id)
    (marker_dir / "slow_step.release").write_text("go")
    app.settle()
    assert cancelling.id == branch.id and client.responses.retrieve(branch.id).status == "cancelled"
    client.responses.delete(branch.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(branch.id)
    assert client.responses.retrieve(second.id).output_text == "Your name is Ann."
    assert texts(app, session_of(app, first.id)) == ["I am Ann.", "Hello Ann.", "Who am I?", "Your name is Ann."]


def test_a_turn_inside_a_run_cannot_be_branched(app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    """A turn that asked for approvals which were answered is inside its run (the run went on from it): nothing
    can follow it but that run's next turn, so continuing it is a 400 that says so; its run's last turn can be."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent.", "Bye."))
    first = client.responses.create(model="helper", input="Email Bob")
    [request] = first.output
    second = client.responses.create(model="helper", previous_response_id=first.id, input=answer(request.id))
    assert (second.id, second.output_text) == (f"{first.id}_2", "Sent.")
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="helper", input="Never mind.", previous_response_id=first.id)
    body = refused.value.body
    assert (body["param"], body["code"]) == ("previous_response_id", "previous_response_mid_run")  # type: ignore[index]
    assert second.id in refused.value.message
    with pytest.raises(openai.NotFoundError):  # a turn that never was
        client.responses.create(model="helper", input="Hi.", previous_response_id=f"{first.id}_3")
    assert len(model.log.requests) == 2  # nothing started
    last = client.responses.create(model="helper", input="Thanks.", previous_response_id=second.id)
    assert (last.output_text, session_of(app, last.id)) == ("Bye.", session_of(app, first.id))


def test_a_turn_whose_approvals_timed_out_is_inside_its_run(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    """Approvals that time out end the run in a turn of its own, after the one that asked: that one cannot be
    continued, and the refusal says why without claiming the approvals were answered."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "never"))
    first = client.responses.create(model="strict", input="Email Bob")
    app.advance(700)  # past the approval timeout
    app.settle()
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="strict", input="Never mind.", previous_response_id=first.id)
    assert refused.value.code == "previous_response_mid_run"
    assert "answered or timed out" in refused.value.message and f"{first.id}_2" in refused.value.message


def answer_fails_once(app: InProcessApp, monkeypatch: pytest.MonkeyPatch) -> list[Exception]:
    """The next create fails after its run started (a transient store error, 503): the error, until raised."""
    from session_store.errors import StoreUnavailableError

    handlers = app.app_module("http_api.openai_responses.handlers")
    wait_for_turn = handlers.wait_for_turn
    failures: list[Exception] = [StoreUnavailableError("throttled")]

    async def fails_once(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return await wait_for_turn(*args, **kwargs)

    monkeypatch.setattr(handlers, "wait_for_turn", fails_once)
    return failures


def created_through_a_lost_answer(
    app: InProcessApp, monkeypatch: pytest.MonkeyPatch, sdk: OpenAI, **create: Any
) -> tuple[Response, set[str]]:
    """`sdk.responses.create(**create)` whose first attempt's answer fails after its run started: the response the
    SDK's retry got, and the caller's sessions before the create."""
    failures = answer_fails_once(app, monkeypatch)
    sessions = session_ids(app)
    response = sdk.responses.create(**create)
    assert not failures  # the first attempt failed, the SDK retried
    app.settle()
    return response, sessions


@watches_the_app_in_process
def test_the_sdk_retry_of_a_continuation_answers_with_the_run_it_started(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The openai SDK retries a create whose answer failed (here a transient 503 after its run started). The retry
    finds the conversation moved on - by its own first attempt - and answers with that run's response: one turn,
    one conversation. The same input sent again without the retry mark asks for another answer: a branch."""
    model.set_script(Script.of("Hello Ann.", "Your name is Ann.", "You are Ann."))
    http = httpx.Client(timeout=300, trust_env=False)
    with OpenAI(base_url=f"{app.host.base_url}/api/v1", api_key="unused", http_client=http) as sdk:  # 2 retries
        first = sdk.responses.create(model="helper", input="I am Ann.")
        second, sessions = created_through_a_lost_answer(app, monkeypatch, sdk, model="helper", input="Who am I?",
                                                         previous_response_id=first.id)
        assert (second.output_text, second.previous_response_id) == ("Your name is Ann.", first.id)
        assert len(model.log.requests) == 2  # the turn ran once
        assert session_of(app, second.id) == session_of(app, first.id)
        assert session_ids(app) == sessions  # no branch

    again = app.http.post("/api/v1/responses", json={"model": "helper", "input": "Who am I?",
                                                      "previous_response_id": first.id})
    assert again.status_code == 200, again.text
    assert again.json()["id"] != second.id and session_of(app, again.json()["id"]) != session_of(app, first.id)


@watches_the_app_in_process
def test_the_sdk_retry_of_a_create_that_branched_answers_with_its_branch(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first attempt continued an earlier response of a conversation that went on: it branched (a new session),
    then its answer failed. The SDK's retry answers with that branch's response - not a second branch (a duplicate
    session, the model paid twice). Without the retry mark the same request branches again; a retry then answers
    with the most recent of the caller's branches that it starts."""
    model.set_script(Script.of("Hello Ann.", "Your name is Ann.", "Hello Bo.", "Hello again Bo.", "never"))
    http = httpx.Client(timeout=300, trust_env=False)
    with OpenAI(base_url=f"{app.host.base_url}/api/v1", api_key="unused", http_client=http) as sdk:  # 2 retries
        first = sdk.responses.create(model="helper", input="I am Ann.")
        sdk.responses.create(model="helper", input="Who am I?", previous_response_id=first.id)
        branch, sessions = created_through_a_lost_answer(app, monkeypatch, sdk, model="helper", input="No, I am Bo.",
                                                         previous_response_id=first.id)
        assert (branch.output_text, branch.previous_response_id) == ("Hello Bo.", first.id)
        assert len(model.log.requests) == 3  # the branch's turn ran once
        assert session_ids(app) - sessions == {session_of(app, branch.id)}  # one branch

    body = {"model": "helper", "input": "No, I am Bo.", "previous_response_id": first.id}
    again = app.http.post("/api/v1/responses", json=body)  # no retry mark: another answer, on a branch of its own
    assert again.status_code == 200, again.text
    assert again.json()["id"] != branch.id and session_of(app, again.json()["id"]) != session_of(app, branch.id)
    retried = app.http.post("/api/v1/responses", json=body, headers={"x-stainless-retry-count": "1"})
    assert retried.status_code == 200, retried.text
    assert retried.json()["id"] == again.json()["id"]  # the most recent branch it starts
    other = app.http.post("/api/v1/responses", json={**body, "metadata": {"k": "v"}},
                          headers={"x-stainless-retry-count": "1"})
    assert other.status_code == 200, other.text  # not what the branches started: a branch of its own
    assert other.json()["id"] not in (branch.id, again.json()["id"])
    assert len(model.log.requests) == 5


def orchestration_start_fails_once(app: InProcessApp, monkeypatch: pytest.MonkeyPatch) -> list[Exception]:
    """The app's next orchestration start fails (the run is closed `start_failed`, the create answers 5xx): the
    failure, until raised."""
    gateway = app.app_module("http_api.durable_gateway").DurableGateway
    start_run, failures = gateway.start_run, [ConnectionError("Durable storage throttled")]

    async def fails_once(self: Any, *args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return await start_run(self, *args, **kwargs)

    monkeypatch.setattr(gateway, "start_run", fails_once)
    return failures


@watches_the_app_in_process  # narrows the app's retry window
def test_a_retry_mark_on_a_request_long_after_the_branch_it_repeats_branches_again(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A keyless "regenerate" whose own first attempt wrote nothing is retried by the SDK: its retry must not be
    answered with the caller's earlier branch of the same input, made longer ago than the retry's first attempt can
    have started (its retry count times its read timeout and the SDK's waits), but branch again."""
    model.set_script(Script.of("Hello Ann.", "Your name is Ann.", "Hello Bo.", "Hello again Bo.", "Bo."))
    first = app.http.post("/api/v1/responses", json={"model": "helper", "input": "I am Ann."}).json()
    app.http.post("/api/v1/responses",
                  json={"model": "helper", "input": "Who am I?", "previous_response_id": first["id"]})
    body = {"model": "helper", "input": "No, I am Bo.", "previous_response_id": first["id"]}
    branch = app.http.post("/api/v1/responses", json=body).json()
    monkeypatch.setattr(app.app_module("http_api.openai_responses.sdk_retry"), "ATTEMPT_SLACK_SECONDS", 0.0)
    retried = app.http.post("/api/v1/responses", json=body,
                            headers={"x-stainless-retry-count": "1", "x-stainless-read-timeout": "0.001"})
    assert retried.status_code == 200, retried.text
    assert retried.json()["id"] != branch["id"], "answered with a branch older than the retry's first attempt"
    assert retried.json()["output"][0]["content"][0]["text"] == "Hello again Bo."
    assert len(model.log.requests) == 4
    odd = app.http.post("/api/v1/responses", json=body, headers={"x-stainless-retry-count": "9" * 5000})
    assert odd.status_code == 200, odd.text  # a 500 before: `int` refuses over 4,300 digits


@watches_the_app_in_process  # fails the app's next orchestration start
def test_the_sdk_retry_of_a_branch_whose_start_failed_branches_again(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first attempt branched, but its orchestration could not be started (the run was closed `start_failed`,
    the answer a 5xx): the SDK's retry starts the branch afresh - not a 200 answering with the failure."""
    model.set_script(Script.of("Hello Ann.", "Your name is Ann.", "Hello Bo."))
    http = httpx.Client(timeout=300, trust_env=False)
    with OpenAI(base_url=f"{app.host.base_url}/api/v1", api_key="unused", http_client=http) as sdk:  # 2 retries
        first = sdk.responses.create(model="helper", input="I am Ann.")
        sdk.responses.create(model="helper", input="Who am I?", previous_response_id=first.id)
        failures = orchestration_start_fails_once(app, monkeypatch)
        branch = sdk.responses.create(model="helper", input="No, I am Bo.", previous_response_id=first.id)
    assert not failures  # the first attempt failed, the SDK retried
    assert (branch.status, branch.output_text, branch.previous_response_id) == ("completed", "Hello Bo.", first.id)


def first_turn_and_history(sdk: OpenAI) -> tuple[Response, list[Any]]:
    """A first response ("I am Ann."), and the conversation so far as a stateless input list sends it again."""
    first = sdk.responses.create(model="helper", input="I am Ann.")
    history: list[Any] = [{"role": "user", "content": "I am Ann."}]
    return first, history + [item.model_dump(exclude_none=True) for item in first.output]


@watches_the_app_in_process
def test_the_sdk_retry_of_a_stateless_continuation_answers_with_the_run_it_started(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same with the whole conversation sent again (a stateless input list): the retry finds its first attempt's
    input stored (nothing new, a 400 before) and answers with the run that attempt started."""
    model.set_script(Script.of("Hello Ann.", "Your name is Ann.", "never"))
    http = httpx.Client(timeout=300, trust_env=False)
    with OpenAI(base_url=f"{app.host.base_url}/api/v1", api_key="unused", http_client=http) as sdk:  # 2 retries
        first, history = first_turn_and_history(sdk)
        second, sessions = created_through_a_lost_answer(
            app, monkeypatch, sdk, model="helper", input=[*history, {"role": "user", "content": "Who am I?"}])
        assert (second.output_text, second.previous_response_id) == ("Your name is Ann.", first.id)
        assert len(model.log.requests) == 2  # the turn ran once
        assert session_ids(app) == sessions


@watches_the_app_in_process  # fails the app's next orchestration start
def test_the_sdk_retry_of_a_stateless_continuation_whose_start_failed_starts_it_afresh(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first attempt stored its run and input, but its orchestration could not be started (the run was closed
    `start_failed`, the answer a 5xx): the SDK's retry of the whole conversation again continues the response before
    the failed run - on a branch, as the failed run took the next place - and does not answer with the failure."""
    model.set_script(Script.of("Hello Ann.", "Your name is Ann.", "never"))
    http = httpx.Client(timeout=300, trust_env=False)
    with OpenAI(base_url=f"{app.host.base_url}/api/v1", api_key="unused", http_client=http) as sdk:  # 2 retries
        first, history = first_turn_and_history(sdk)
        failures = orchestration_start_fails_once(app, monkeypatch)
        second = sdk.responses.create(model="helper", input=[*history, {"role": "user", "content": "Who am I?"}])
    assert not failures  # the first attempt failed, the SDK retried
    assert (second.status, second.output_text, second.previous_response_id) == (
        "completed", "Your name is Ann.", first.id)
    assert len(model.log.requests) == 2  # the model was called once for it
    sent = model.log.last.messages  # the failed run's input is not in the branch
    assert [m["content"] for m in sent if m["role"] in ("user", "assistant")] == [
        "I am Ann.", "Hello Ann.", "Who am I?"]


def test_an_idempotency_key_answers_a_create_again_with_its_response(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    """With an `Idempotency-Key` (as on `POST /api/runs`), the same create again - a new conversation or a
    continuation - answers with the response the first one made; the key with another body is refused."""
    model.set_script(Script.of("Hello Ann.", "Your name is Ann.", "never"))
    sessions = session_ids(app)
    key, other_key = uuid.uuid4().hex, uuid.uuid4().hex  # the store may outlive the test (Cosmos): fresh keys
    first = client.responses.create(model="helper", input="I am Ann.", extra_headers={"Idempotency-Key": key})
    again = client.responses.create(model="helper", input="I am Ann.", extra_headers={"Idempotency-Key": key})
    assert again.id == first.id and again.output_text == "Hello Ann."
    body = {"model": "helper", "input": "Who am I?", "previous_response_id": first.id}
    answers = [app.http.post("/api/v1/responses", json=body, headers={"Idempotency-Key": other_key}) for _ in range(2)]
    assert [a.status_code for a in answers] == [200, 200], answers[1].text
    assert answers[0].json()["id"] == answers[1].json()["id"]
    assert answers[1].json()["output"][0]["content"][0]["text"] == "Your name is Ann."
    assert len(model.log.requests) == 2
    assert session_ids(app) - sessions == {session_of(app, first.id)}
    reused = app.http.post("/api/v1/responses", json={**body, "input": "Other."},
                           headers={"Idempotency-Key": other_key})
    assert reused.status_code == 400 and len(model.log.requests) == 2
    assert (reused.json()["error"]["code"], reused.json()["error"]["param"]) == (
        "idempotency_key_reused", "header.Idempotency-Key")


def test_an_idempotency_key_covers_a_stateless_input_list(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    """The key is claimed for the body as sent: a retry of a stateless continuation (the whole conversation again,
    which by then holds the first attempt's input) answers with the first one's response, streamed or in the
    background as the retry asks - not 400 "adds nothing" or 409 in progress."""
    model.set_script(Script.of("Hello Ann.", "Your name is Ann.", "never"))
    first = client.responses.create(model="helper", input="I am Ann.")
    history: list[Any] = [{"role": "user", "content": "I am Ann."}]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    body = {"model": "helper", "input": [*history, {"role": "user", "content": "Who am I?"}]}
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    answers = [app.http.post("/api/v1/responses", json=body, headers=headers) for _ in range(2)]
    assert [a.status_code for a in answers] == [200, 200], answers[1].text
    assert answers[0].json()["id"] == answers[1].json()["id"]
    assert answers[0].json()["previous_response_id"] == first.id
    in_background = app.http.post("/api/v1/responses", json={**body, "background": True}, headers=headers)
    assert in_background.status_code == 200, in_background.text  # `background` only shapes the answer
    assert in_background.json()["id"] == answers[0].json()["id"]
    assert len(model.log.requests) == 2


def stored_never_started(
    app: InProcessApp, monkeypatch: pytest.MonkeyPatch, body: dict[str, Any], headers: dict[str, str]
) -> None:
    """The create with the key writes its run and input, then dies before starting it (`never_started`)."""
    never_started(app.app_module, monkeypatch, lambda: app.http.post("/api/v1/responses", json=body, headers=headers))


@watches_the_app_in_process  # fails the app's orchestration start and its store's close, and ages the key's claim
def test_a_key_retry_starts_the_stateless_continuation_its_first_attempt_stored_but_never_started(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first attempt wrote its run and input, then could neither start the orchestration nor close the run (it
    died): once it is surely over, the key's retry takes the start over and starts that run with its stored input -
    not 400 "adds nothing" (the whole list, read against the conversation that now holds that input), which would
    leave the run written and never started for good (a start is taken over only once)."""
    model.set_script(Script.of("Hello Ann.", "Your name is Ann."))
    first = client.responses.create(model="helper", input="I am Ann.")
    history: list[Any] = [{"role": "user", "content": "I am Ann."}]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    body = {"model": "helper", "input": [*history, {"role": "user", "content": "Who am I?"}]}
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    stored_never_started(app, monkeypatch, body, headers)

    retried = app.http.post("/api/v1/responses", json=body, headers=headers)
    assert retried.status_code == 200, retried.text
    assert retried.json()["status"] == "completed", retried.json()
    assert retried.json()["output"][0]["content"][0]["text"] == "Your name is Ann."
    assert retried.json()["previous_response_id"] == first.id
    assert len(model.log.requests) == 2
    assert texts(app, session_of(app, first.id)) == ["I am Ann.", "Hello Ann.", "Who am I?", "Your name is Ann."]


@watches_the_app_in_process  # as above, and fails the webhook's check on the retry
def test_a_key_retry_starts_the_run_its_first_attempt_stored_whatever_its_webhook_check_says_now(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first attempt checked `metadata.webhook`, stored its run, then died before starting it. By the key's
    retry the webhook's host no longer resolves: the retry starts the stored run all the same, with the webhook its
    first attempt checked (each send checks the host again) - not a 400 that leaves the run written and never
    started for good. A new create is still refused that webhook."""
    model.set_script(Script.of("Hello Ann."))
    with stored_with_a_webhook(app_with, monkeypatch) as (app, receiver, body, headers):
        host_unresolvable(app.app_module, monkeypatch)
        refused = app.http.post("/api/v1/responses", json=body)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "webhook_not_allowed"

        retried = app.http.post("/api/v1/responses", json=body, headers=headers)
        assert retried.status_code == 200, retried.text
        assert retried.json()["status"] == "completed", retried.json()
        assert retried.json()["output"][0]["content"][0]["text"] == "Hello Ann."
        app.settle()
        [done] = receiver.accepted()
        assert done.verified and done.payload["type"] == "run.completed"
        assert f"resp_{done.payload['data']['run_id']}" == retried.json()["id"]


@contextmanager
def stored_with_a_webhook(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[InProcessApp, WebhookReceiver, dict[str, Any], dict[str, str]]]:
    """An app allowing webhooks to 127.0.0.1 and a receiver there; a create with the receiver as its
    `metadata.webhook` and a key stored its run and died before starting it (`stored_never_started`)."""
    receiver = WebhookReceiver().start()
    try:
        with app_with(WEBHOOK_SECRET=SECRET, WEBHOOK_ALLOWED_HOSTS="127.0.0.1") as app:
            body = {"model": "helper", "input": "I am Ann.", "metadata": {"webhook": receiver.url}}
            headers = {"Idempotency-Key": uuid.uuid4().hex}
            stored_never_started(app, monkeypatch, body, headers)
            yield app, receiver, body, headers
    finally:
        receiver.stop()


@watches_the_app_in_process  # as above, and revokes the webhook's host before the retry
def test_a_key_retry_starts_a_stored_run_whose_webhook_host_was_revoked_since_without_it(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the settings allow is checked again on a take-over (only the host's look-up is left to the sends): an
    operator took the host out of WEBHOOK_ALLOWED_HOSTS since the first attempt, so the run starts without its
    webhook - no events posted to the revoked host, and not a refusal either, which would leave the run written and
    never started for good (a start is taken over once)."""
    model.set_script(Script.of("Hello Ann."))
    with stored_with_a_webhook(app_with, monkeypatch) as (app, receiver, body, headers):
        host_revoked(app.app_module, monkeypatch)
        retried = app.http.post("/api/v1/responses", json=body, headers=headers)
        assert retried.status_code == 200, retried.text
        assert retried.json()["status"] == "completed", retried.json()
        again = app.http.post("/api/v1/responses", json=body, headers=headers)
        assert again.json()["id"] == retried.json()["id"]
        app.settle()
        assert receiver.accepted() == []


@watches_the_app_in_process
def test_a_store_failure_after_the_key_is_claimed_releases_it(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A continuation that fails before writing anything (the store unavailable: 503) gives its key up: the retry
    with the key starts the run, not a 409 `idempotency_key_busy` for the rest of the claim's life."""
    from session_store.errors import StoreUnavailableError

    model.set_script(Script.of("Hello Ann.", "Your name is Ann."))
    first = client.responses.create(model="helper", input="I am Ann.")
    store = app.services().current().store
    get_session = store.get_session
    failures = [StoreUnavailableError("throttled")]

    async def fails_once(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return await get_session(*args, **kwargs)

    monkeypatch.setattr(store, "get_session", fails_once)
    body = {"model": "helper", "input": "Who am I?", "previous_response_id": first.id}
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    failed = app.http.post("/api/v1/responses", json=body, headers=headers)
    assert failed.status_code == 503 and not failures, failed.text
    again = app.http.post("/api/v1/responses", json=body, headers=headers)
    assert again.status_code == 200, again.text
    assert again.json()["output"][0]["content"][0]["text"] == "Your name is Ann."


@watches_the_app_in_process
def test_a_branch_racing_a_delete_of_its_conversation_is_not_found(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The original conversation is deleted while a branch copies it: the previous response is gone (404, as for a
    continuation), not a branch answered with what was left of it; the copy goes and the key is given up."""
    model.set_script(Script.of("Hello Ann.", "Your name is Ann.", "never"))
    first = client.responses.create(model="helper", input="I am Ann.")
    client.responses.create(model="helper", input="Who am I?", previous_response_id=first.id)
    original = session_of(app, first.id)
    sessions = session_ids(app) - {original}
    handlers = app.app_module("http_api.openai_responses.handlers")
    copy_for = handlers.copy_for

    async def deleted_first(store: Any, *args: Any, **kwargs: Any) -> Any:
        await store.delete_session(original)  # a DELETE of the conversation lands here
        return await copy_for(store, *args, **kwargs)

    monkeypatch.setattr(handlers, "copy_for", deleted_first)
    body = {"model": "helper", "input": "Or am I Bo?", "previous_response_id": first.id}
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    for _ in range(2):  # the retry with the key is told the same, not to wait for a claim never given up
        gone = app.http.post("/api/v1/responses", json=body, headers=headers)
        assert gone.status_code == 404, gone.text
        assert (gone.json()["error"]["param"], gone.json()["error"]["code"]) == (
            "previous_response_id", "response_not_found")
    assert len(model.log.requests) == 2
    assert session_ids(app) == sessions  # no copy left


@watches_the_app_in_process
@pytest.mark.parametrize("deleted", ["before_the_read", "before_the_claim"])
def test_a_continuation_racing_a_delete_of_its_conversation_is_not_found(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, deleted: str
) -> None:
    """The conversation is deleted while a continuation of it starts (after its checks): the previous response is
    gone, a 404 as for any response not there - not an empty conversation answered with 200 - and no empty session
    is left re-created under the deleted one's id."""
    model.set_script(Script.of("Hello Ann.", "Your name is Ann.", "never"))
    first = client.responses.create(model="helper", input="I am Ann.")
    second = client.responses.create(model="helper", input="Who am I?", previous_response_id=first.id)
    original = session_of(app, first.id)
    sessions = session_ids(app) - {original}
    handlers = app.app_module("http_api.openai_responses.handlers")
    if deleted == "before_the_read":
        check = handlers._check_continuable

        async def then_deleted(services: Any, *args: Any) -> None:
            await check(services, *args)
            await services.store.delete_session(original)  # a DELETE of the conversation lands here

        monkeypatch.setattr(handlers, "_check_continuable", then_deleted)
    else:
        start_agent_run = handlers.start_agent_run

        async def deleted_first(services: Any, *args: Any, **kwargs: Any) -> Any:
            await services.store.delete_session(original)
            return await start_agent_run(services, *args, **kwargs)

        monkeypatch.setattr(handlers, "start_agent_run", deleted_first)
    with pytest.raises(openai.NotFoundError) as gone:
        client.responses.create(model="helper", input="No, I am Bo.", previous_response_id=second.id)
    body = gone.value.body
    assert (body["param"], body["code"]) == ("previous_response_id", "response_not_found")  # type: ignore[index]
    assert len(model.log.requests) == 2
    assert app.http.get(f"/api/sessions/{original}").status_code == 404
    assert session_ids(app) == sessions  # no branch, nor the deleted one re-created


@watches_the_app_in_process
def test_a_continuation_racing_a_delete_leaves_another_callers_session(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A continuation racing a DELETE deletes the empty session it re-created under the conversation's id - only
    its caller's: another caller's session made under that id meanwhile (empty, before its run) is not touched."""
    model.set_script(Script.of("Hello Ann.", "never"))
    first = client.responses.create(model="helper", input="I am Ann.")
    original = session_of(app, first.id)
    handlers = app.app_module("http_api.openai_responses.handlers")
    start_agent_run = handlers.start_agent_run

    async def deleted_then_taken(services: Any, *args: Any, **kwargs: Any) -> Any:
        store = services.store
        await store.delete_session(original)
        try:
            return await start_agent_run(services, *args, **kwargs)  # re-creates it empty: its claim is refused
        finally:
            await store.delete_session(original)  # deleted again, and made anew by another caller
            await store.create_session(original, "helper", owner_id="someone-else", owner_name="Someone")

    monkeypatch.setattr(handlers, "start_agent_run", deleted_then_taken)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="helper", input="No, I am Bo.", previous_response_id=first.id)
    kept = app.store_call(lambda store: store.get_session(original))
    assert kept is not None and kept.owner_id == "someone-else"
    app.store_call(lambda store: store.delete_session(original))


@watches_the_app_in_process
def test_two_continuations_of_one_response_at_once(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two clients continue the same response at once. One request passes the "latest response" check, then the
    other's run starts and even finishes before the first claims the session: the first is not chained after it (its
    client never saw that exchange) but branches from the response it continues, as OpenAI's API would."""
    model.set_script(Script.of("Hello Ann.", "Ann, you asked twice.", "You are Ann."))
    first = client.responses.create(model="helper", input="I am Ann.")
    handlers = app.app_module("http_api.openai_responses.handlers")
    start_agent_run = handlers.start_agent_run
    checked, other_done = threading.Event(), threading.Event()

    async def after_the_other_continued(*args: Any, **kwargs: Any) -> Any:
        if not checked.is_set():  # the slow request: past its check, not yet in the session
            checked.set()
            await asyncio.to_thread(other_done.wait, PROGRESS_TIMEOUT_S)
        return await start_agent_run(*args, **kwargs)

    monkeypatch.setattr(handlers, "start_agent_run", after_the_other_continued)
    outcome: dict[str, Any] = {}

    def slow() -> None:
        http = httpx.Client(timeout=300, trust_env=False)
        with OpenAI(base_url=f"{app.host.base_url}/api/v1", api_key="unused", http_client=http, max_retries=0) as own:
            try:
                outcome["response"] = own.responses.create(
                    model="helper", input="Who am I?", previous_response_id=first.id
                )
            except openai.APIStatusError as error:
                outcome["error"] = error

    slow_request = threading.Thread(target=slow)
    slow_request.start()
    assert checked.wait(PROGRESS_TIMEOUT_S)
    other = client.responses.create(model="helper", input="Who am I, again?", previous_response_id=first.id)
    other_done.set()
    slow_request.join(PROGRESS_TIMEOUT_S)
    assert other.status == "completed" and other.previous_response_id == first.id
    assert "error" not in outcome, outcome["error"].body
    slow_one = outcome["response"]
    assert (slow_one.output_text, slow_one.previous_response_id) == ("You are Ann.", first.id)
    assert conversation(model) == ["I am Ann.", "Hello Ann.", "Who am I?"]  # not after the other's exchange
    assert session_of(app, other.id) == session_of(app, first.id) != session_of(app, slow_one.id)
    assert texts(app, session_of(app, first.id)) == ["I am Ann.", "Hello Ann.", "Who am I, again?",
                                                     "Ann, you asked twice."]


def test_two_continuations_of_one_response_sent_together(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    """Truly at once: each either goes on (in the conversation, or on a branch of it) or is told the conversation
    is busy for a moment (409 `session_busy`, which a retry gets past); never a 500, nothing lost."""
    model.set_script(Script.of("Hello Ann.", "One.", "One."))
    first = client.responses.create(model="helper", input="I am Ann.")

    async def both() -> list[Any]:
        async with async_client(app) as own:
            return await asyncio.gather(
                *(own.responses.create(model="helper", input=f"Question {i}", previous_response_id=first.id)
                  for i in (1, 2)),
                return_exceptions=True,
            )

    answers = asyncio.run(both())
    done = [a for a in answers if isinstance(a, Response)]
    for refused in (a for a in answers if not isinstance(a, Response)):
        assert isinstance(refused, openai.ConflictError) and refused.code == "session_busy", refused
    assert done and all((r.status, r.previous_response_id) == ("completed", first.id) for r in done)
    sessions = [session_of(app, r.id) for r in done]
    assert session_of(app, first.id) in sessions and len(set(sessions)) == len(sessions)
    for response in done:  # each conversation: turn 1 and its own question, whichever went on in place
        own = texts(app, session_of(app, response.id))
        assert own[:2] == ["I am Ann.", "Hello Ann."] and len(own) == 4 and own[2].startswith("Question")


def test_input_items(app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    model.set_script(Script.of("ok"))
    response = client.responses.create(
        model="helper",
        input=[
            {"role": "developer", "content": "Context: tests."},
            {
                "role": "user",
                "content": [{"type": "input_text", "text": "first"}, {"type": "input_text", "text": "second"}],
            },
        ],
    )
    items = client.responses.input_items.list(response.id, order="asc")
    assert [(i.type, i.role) for i in items.data] == [("message", "system"), ("message", "user")]
    assert [c.text for c in items.data[1].content] == ["first", "second"]
    newest_first = client.responses.input_items.list(response.id, limit=1)
    assert [i.role for i in newest_first.data] == ["user"] and newest_first.has_more
    after = client.responses.input_items.list(response.id, limit=1, after=newest_first.data[0].id)
    assert [i.role for i in after.data] == ["system"] and not after.has_more


def test_approve_via_mcp_approval_response(app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    first = client.responses.create(model="helper", input="Email Bob")
    assert first.status == "completed"  # the turn ends with the request, as OpenAI's do
    [request] = first.output
    assert (request.type, request.server_label, request.name) == ("mcp_approval_request", "helper", "send_email")
    assert json.loads(request.arguments) == EMAIL_BOB
    view = app.view(run_of(first.id))
    assert view["status"] == "requires_action" and [a["approval_id"] for a in view["pending_approvals"]] == [request.id]

    # A new message while the run waits for the answer is refused (the run cannot take it mid-way).
    with pytest.raises(openai.BadRequestError) as waiting:
        client.responses.create(model="helper", previous_response_id=first.id, input="never mind")
    assert waiting.value.body["code"] == "previous_response_waiting" and first.id in waiting.value.message  # type: ignore[index]

    answer = [{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}]
    second = client.responses.create(model="helper", previous_response_id=first.id, input=answer)
    assert second.id != first.id and run_of(second.id) == run_of(first.id)  # the same durable run continues
    assert (second.status, second.output_text, second.previous_response_id) == ("completed", "Sent.", first.id)
    [call, _] = second.output
    assert (call.type, call.name, call.approval_request_id, call.error) == ("mcp_call", "send_email", request.id, None)
    assert json.loads(call.output or "")["status"] == "sent"
    assert app.effects(view["session_id"], "email") == [EMAIL_BOB]  # the tool ran once
    [record] = app.approvals(run_of(first.id))
    assert record["status"] == "approved"
    # The earlier turn is unchanged; the decision is the later turn's input.
    assert client.responses.retrieve(first.id).output[0].type == "mcp_approval_request"
    assert_official_shape(app, first.id)
    assert_official_shape(app, second.id)
    [item] = client.responses.input_items.list(second.id).data
    assert (item.type, item.approval_request_id, item.approve) == ("mcp_approval_response", request.id, True)
    # The same answer again is a retry of the same decision: the same response, the tool still ran once.
    again = client.responses.create(model="helper", previous_response_id=first.id, input=answer)
    assert (again.id, again.output_text) == (second.id, "Sent.")
    app.settle()
    assert app.effects(view["session_id"], "email") == [EMAIL_BOB]
    # A different answer to a decided request is refused, in OpenAI's shape.
    with pytest.raises(openai.APIStatusError) as error:
        client.responses.create(
            model="helper",
            previous_response_id=first.id,
            input=[{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": False}],
        )
    assert error.value.status_code == 410 or error.value.status_code == 409
    assert error.value.body["param"] == "input[0]"  # type: ignore[index]


def test_two_clients_answer_a_responses_requests_each_in_its_own_order(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    """One client answers the first of two requests; another answers both, the first again, in its own order (found
    by a storm probe: it was a 400 `input_contradicts_conversation`, the repeated answer being after the new one).
    Each request is decided once, and the run goes on once both are."""
    ALICE = {**EMAIL_BOB, "to": "alice@example.com"}
    model.set_script(Script.of(Reply(tool_calls=[
        ScriptedToolCall(name="send_email", arguments=EMAIL_BOB), ScriptedToolCall(name="send_email", arguments=ALICE),
    ]), "Sent to Bob only."))
    first = client.responses.create(model="helper", input="Email Bob and Alice")
    bob, alice = (item.id for item in first.output)
    answer = {"type": "mcp_approval_response", "approve": True}
    partial = client.responses.create(model="helper", previous_response_id=first.id, background=True,
                                      input=[{**answer, "approval_request_id": bob}])
    app.settle()
    both = client.responses.create(model="helper", previous_response_id=first.id, input=[
        {**answer, "approval_request_id": alice, "approve": False}, {**answer, "approval_request_id": bob},
    ])
    assert (both.status, both.output_text) == ("completed", "Sent to Bob only."), both
    assert {a["approval_id"]: a["status"] for a in app.approvals(run_of(first.id))} == {
        bob: "approved", alice: "rejected"
    }
    assert app.effects(app.view(run_of(first.id))["session_id"], "email") == [EMAIL_BOB]
    assert client.responses.retrieve(partial.id).status in ("completed", "in_progress")


def test_two_clients_answering_both_requests_at_once_in_opposite_orders_both_succeed(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The same two answers sent at once by two clients (official async client), each in its own order: whichever
    lands first decides, the other's answers repeat it; neither is refused, each request is decided once and the
    approved email is sent once."""
    ALICE = {**EMAIL_BOB, "to": "alice@example.com"}
    model.set_script(Script.of(Reply(tool_calls=[
        ScriptedToolCall(name="send_email", arguments=EMAIL_BOB), ScriptedToolCall(name="send_email", arguments=ALICE),
    ]), "Sent to Bob only."))

    async def scenario() -> tuple[str, list[Response]]:
        async with async_client(app) as first_client, async_client(app) as second_client:
            first = await first_client.responses.create(model="helper", input="Email Bob and Alice")
            bob, alice = (item.id for item in first.output)
            answers = [{"type": "mcp_approval_response", "approval_request_id": bob, "approve": True},
                       {"type": "mcp_approval_response", "approval_request_id": alice, "approve": False}]
            both = await asyncio.gather(
                first_client.responses.create(model="helper", previous_response_id=first.id, input=answers),
                second_client.responses.create(model="helper", previous_response_id=first.id, input=answers[::-1]),
            )
            return first.id, list(both)

    first_id, answered = asyncio.run(scenario())
    app.settle()
    assert [(r.status, r.output_text) for r in answered] == [("completed", "Sent to Bob only.")] * 2
    assert sorted(a["status"] for a in app.approvals(run_of(first_id))) == ["approved", "rejected"]
    assert app.effects(app.view(run_of(first_id))["session_id"], "email") == [EMAIL_BOB]


def test_reject_via_mcp_approval_response(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Not sent, as you wish."))

    async def scenario() -> tuple[str, object]:
        async with async_client(app) as client:
            first = await client.responses.create(model="helper", input="Email Bob")
            [request] = first.output
            second = await client.responses.create(
                model="helper",
                previous_response_id=first.id,
                input=[
                    {
                        "type": "mcp_approval_response",
                        "approval_request_id": request.id,
                        "approve": False,
                        "reason": "not today",
                    }
                ],
            )
            return first.id, second

    first_id, second = asyncio.run(scenario())
    assert (second.status, second.output_text) == ("completed", "Not sent, as you wish.")  # type: ignore[attr-defined]
    [call, _] = second.output  # type: ignore[attr-defined]
    assert call.type == "mcp_call" and call.output is None
    assert call.error.type == "mcp_tool_execution_error" and "denied" in call.error.content[0]["text"]
    view = app.view(run_of(first_id))
    assert app.effects(view["session_id"], "email") == []
    [record] = app.approvals(run_of(first_id))
    assert (record["status"], record["reason"]) == ("rejected", "not today")


class Verdict(BaseModel):
    approved: bool
    score: int


def test_structured_output(app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply(json_output={"approved": True, "score": 7})))
    parsed = client.responses.parse(model="helper", input="Judge it.", text_format=Verdict)
    assert parsed.output_parsed == Verdict(approved=True, score=7)
    fmt = model.log.last.body["response_format"]  # type: ignore[index]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Verdict"
    assert fmt["json_schema"]["strict"] is True
    assert app.view(run_of(parsed.id))["output"]["value"] == {"approved": True, "score": 7}
    # The next response of the session has no output format of its own.
    model.set_script(Script.of("plain"))
    plain = client.responses.create(model="helper", input="And now?", previous_response_id=parsed.id)
    assert plain.output_text == "plain" and "response_format" not in (model.log.last.body or {})


def test_structured_output_that_does_not_match_fails(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    model.set_script(Script.of(Reply(json_output={"approved": "yes"})))
    schema = Verdict.model_json_schema()
    response = client.responses.create(
        model="helper",
        input="Judge it.",
        text={"format": {"type": "json_schema", "name": "verdict", "schema": schema}},
    )
    assert response.status == "failed"
    assert response.error is not None and response.error.code == "server_error"
    assert response.error.message.startswith("invalid_structured_output: ")
    assert "approved" in response.error.message or "score" in response.error.message
    assert_official_shape(app, response.id)


def test_cancel_and_delete(app: InProcessApp, client: OpenAI, model: ScriptedModelServer, marker_dir: Path) -> None:
    model.set_script(Script.of(Reply.call("slow_step", {"label": "x"}), "never"))
    response = client.responses.create(model="helper", input="go", background=True)
    wait_for_file(marker_dir / "slow_step.started")
    with pytest.raises(openai.ConflictError):
        client.responses.delete(response.id)  # the run is still going on
    cancelling = client.responses.cancel(response.id)
    (marker_dir / "slow_step.release").write_text("go")
    app.settle()
    assert cancelling.id == response.id
    cancelled = client.responses.retrieve(response.id)
    assert cancelled.status == "cancelled"
    assert client.responses.cancel(response.id).status == "cancelled"  # again: no change
    client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)


def test_errors_in_openai_shape(app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    model.set_script(Script.of("ok"))
    with pytest.raises(openai.NotFoundError) as not_found:
        client.responses.create(model="nobody", input="hi")
    assert not_found.value.body == {  # type: ignore[comparison-overlap]
        "message": not_found.value.body["message"],  # type: ignore[index]
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }
    cases = [
        ({"temperature": 0.2}, "temperature", "unsupported_parameter"),
        ({"tools": [{"type": "web_search"}]}, "tools[0].type", "unsupported_parameter"),
        ({"stream_options": {"include_obfuscation": True}}, "stream_options", None),
        (
            # Not a call this server made: client-side function tools are refused, naming the item.
            {"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]},
            "input[0]",
            "unsupported_parameter",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x"}]}]},
            "input[0].content[0].type",
            "unsupported_parameter",
        ),
        (
            {"input": [{"type": "mcp_approval_response", "approval_request_id": "x", "approve": True}]},
            "previous_response_id",
            None,
        ),
        ({"input": "   "}, "input", None),
        (
            {"text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": "array"}}}},
            "text.format.schema",
            None,
        ),
    ]
    for extra, param, code in cases:
        body = {"model": "helper", "input": "hi", **extra}
        http = httpx.post(f"{app.host.base_url}/api/v1/responses", json=body, timeout=60, trust_env=False)
        assert http.status_code == 400, (extra, http.text)
        error = http.json()["error"]
        assert (error["param"], error["type"]) == (param, "invalid_request_error"), (extra, error)
        assert code is None or error["code"] == code, (extra, error)
        assert error["message"]
    with pytest.raises(openai.BadRequestError) as unsupported:
        client.responses.create(model="helper", input="hi", temperature=0.5)
    assert unsupported.value.body["param"] == "temperature"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_" + "0" * 32)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("not-a-response")
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_" + "0" * 32, stream=True, starting_after=3)
    with pytest.raises(openai.BadRequestError) as unknown:
        client.responses.retrieve("resp_" + "0" * 32, extra_query={"after": "x"})
    assert unknown.value.body["param"] == "after"  # type: ignore[index]


def test_every_answer_has_a_request_id(app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    """OpenAI's `x-request-id` on every answer of the API (objects, errors, streams, unknown routes), as the SDKs read
    it: `response._request_id`, `with_raw_response.request_id`, an error's `request_id`; one id per request."""
    model.set_script(Script.of("one", "two"))
    created = client.responses.create(model="helper", input="hi")
    retrieved = client.responses.retrieve(created.id)
    raw = client.models.with_raw_response.list()
    with client.responses.create(model="helper", input="again", stream=True) as stream:
        streamed = stream.response.headers.get("x-request-id")
        list(stream)
    with pytest.raises(openai.NotFoundError) as not_found:
        client.responses.retrieve("resp_" + "0" * 32)
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model="helper", input="hi", temperature=0.5)
    unknown = app.http.get("/api/v1/nowhere")
    ids = [created._request_id, retrieved._request_id, raw.request_id, streamed, not_found.value.request_id,
           bad.value.request_id, unknown.headers.get("x-request-id")]
    assert all(isinstance(i, str) and i.startswith("req_") for i in ids), ids
    assert len(set(ids)) == len(ids)


def test_the_sdk_does_not_retry_a_conflict_that_stays(app: InProcessApp, model: ScriptedModelServer) -> None:
    """The openai SDKs retry every 409 unless the answer says `x-should-retry: false`: a conflict that retrying
    cannot end (cancelling a completed response, answering an approval already decided) says so; one that passes
    (`session_busy`, `previous_response_in_progress`, `idempotency_key_busy`) does not."""
    model.set_script(Script.of("done", Reply.call("send_email", EMAIL_BOB), "Sent."))
    http = httpx.Client(timeout=300, trust_env=False)
    with OpenAI(base_url=f"{app.host.base_url}/api/v1", api_key="unused", http_client=http, max_retries=2) as client:
        done = client.responses.create(model="helper", input="hi")
        with pytest.raises(openai.ConflictError) as completed:
            client.responses.cancel(done.id)
        asking = client.responses.create(model="helper", input="Email Bob")
        [request] = [item for item in asking.output if item.type == "mcp_approval_request"]
        app.decide(run_of(asking.id), request.id, "approve")
        app.settle()
        with pytest.raises(openai.ConflictError) as decided:
            client.responses.create(model="helper", previous_response_id=asking.id, input=[
                {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": False}])
    for refused in (completed.value, decided.value):
        assert refused.response.headers.get("x-should-retry") == "false", refused.body
        assert refused.response.request.headers["x-stainless-retry-count"] == "0"  # the first attempt was the last


@watches_the_app_in_process
def test_a_response_whose_cancel_the_hub_refused_takes_no_answer_and_ends_cancelled(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The official client cancels a response waiting for an approval while the task hub refuses the cancel event:
    the SDK retries the 503 `cancel_not_delivered` as its `Retry-After` says, then gives up. The cancel stands
    (flagged): an `mcp_approval_response` is a 409 that the SDK does not retry, and the email is never sent; that
    request's look at the run, with the hub back, rings the cancel again and the run ends cancelled."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    with app_with(DECISION_REDELIVERY_SECONDS="0") as app, OpenAI(
        base_url=f"{app.host.base_url}/api/v1", api_key="unused", max_retries=2,
        http_client=httpx.Client(timeout=300, trust_env=False),
    ) as client:
        first = client.responses.create(model="helper", input="Email Bob")
        [request] = first.output
        run_id = run_of(first.id)

        async def unreachable(instance_id: str, name: str, input_json: str | None) -> None:
            raise RuntimeError("the task hub is unreachable")

        with monkeypatch.context() as hub_down:
            hub_down.setattr(app.host.engine, "raise_event", unreachable)
            with pytest.raises(openai.InternalServerError) as refused:
                client.responses.cancel(first.id)
        assert (refused.value.status_code, refused.value.body["code"]) == (503, "cancel_not_delivered")  # type: ignore[index]
        assert refused.value.response.request.headers["x-stainless-retry-count"] == "2"  # sent three times

        with pytest.raises(openai.ConflictError) as answered:
            client.responses.create(model="helper", previous_response_id=first.id, input=answer(request.id))
        assert answered.value.body["code"] == "run_finished" and answered.value.body["param"] == "input[0]"  # type: ignore[index]
        assert answered.value.response.request.headers["x-stainless-retry-count"] == "0"
        app.settle()  # the answer's own look at the run (the hub back) rang the cancel: no poll was needed
        [run] = [r for s in app.snapshot().sessions.values() for r in s["runs"] if r["run_id"] == run_id]
        assert run["status"] == "cancelled"
        assert app.effects(run["session_id"], "email") == []
        assert [a["status"] for a in app.approvals(run_id)] == ["expired"]
        assert client.responses.retrieve(first.id).status == "cancelled"  # the turn the client holds shows it


def test_instructions_up_to_the_runs_limit(app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    """`instructions` are the run's (at most `MAX_INSTRUCTIONS_CHARS`): one character more is a 400 naming them
    before anything is written (it was a 500 once the run's overrides were built); exactly the limit is a run."""
    model.set_script(Script.of("ok"))
    before = app.snapshot()
    with pytest.raises(openai.BadRequestError) as too_long:
        client.responses.create(model="helper", input="hi", instructions="x" * (MAX_INSTRUCTIONS_CHARS + 1))
    assert too_long.value.body["param"] == "instructions"  # type: ignore[index]
    assert app.snapshot() == before
    at_limit = client.responses.create(model="helper", input="hi", instructions="x" * MAX_INSTRUCTIONS_CHARS)
    assert (at_limit.status, at_limit.output_text) == ("completed", "ok")


# A lone UTF-16 surrogate: valid JSON escape syntax, but no Unicode text (I-JSON forbids it); nothing can store or
# send it as UTF-8.
LONE = "\\ud800"


@pytest.mark.parametrize(
    "body",
    [
        f'{{"model": "helper", "input": "hi", "instructions": "be {LONE} brief"}}',
        f'{{"model": "helper", "input": [{{"role": "user", "content": "hi {LONE}"}}]}}',
        f'{{"model": "helper", "input": [{{"role": "user", "content": [{{"type": "input_text", "text": "{LONE}"}}]}}]'
        "}",
        f'{{"model": "helper", "input": "hi", "previous_response_id": "resp_{LONE}"}}',
        f'{{"model": "helper", "input": "hi", "tools": [{{"type": "mcp", "server_label": "{LONE}"}}]}}',
        f'{{"model": "helper", "input": "hi", "text": {{"format": {{"type": "json_schema", "name": "n", '
        f'"schema": {{"type": "object", "description": "{LONE}"}}}}}}}}',
        # Not UTF-8, but Python's JSON reader decodes bytes with "surrogatepass".
        '{"model": "helper", "input": "hi \ud800"}'.encode("utf-8", "surrogatepass"),
    ],
    ids=["instructions", "message", "text part", "previous_response_id", "server_label", "schema", "encoded"],
)
def test_a_lone_surrogate_in_the_body_is_a_400(
    app: InProcessApp, model: ScriptedModelServer, body: str | bytes
) -> None:
    """A `\\ud800` escape with no pair is JSON syntax but not text: refused where the body is read, in OpenAI's
    shape, before anything is written (it was a 500 - for some fields a bare one, the error message itself holding
    the character - from whichever step first tried to store or encode it)."""
    model.set_script(Script.of("unused"))
    before = app.snapshot()
    content = body if isinstance(body, bytes) else body.encode()
    http = httpx.post(f"{app.host.base_url}/api/v1/responses", content=content, timeout=60, trust_env=False,
                      headers={"content-type": "application/json"})
    assert http.status_code == 400, http.text
    error = http.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "malformed_json"), error
    assert "U+D800" in error["message"]
    assert app.snapshot() == before and model.log.total == 0


EMAIL_EVE = {"to": "eve@example.com", "subject": "Hi", "body": "Hello Eve"}


def answer(approval_id: str, approve: bool = True) -> list[dict[str, object]]:
    return [{"type": "mcp_approval_response", "approval_request_id": approval_id, "approve": approve}]


def test_one_request_answering_a_request_twice_is_refused(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    """The same approval request answered twice in one input: a 400 naming the second item, nothing decided. Each
    copy went through the whole decision path (the first decided, the rest were "the same answer again"): 1,900
    copies in a 256 KB body took 18 s and thousands of store operations on Cosmos, for one request."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    first = client.responses.create(model="helper", input="Email Bob")
    [request] = first.output
    with pytest.raises(openai.BadRequestError) as twice:
        client.responses.create(model="helper", previous_response_id=first.id, input=answer(request.id) * 2)
    assert twice.value.body["param"] == "input[1]"  # type: ignore[index]
    assert [a["status"] for a in app.approvals(run_of(first.id))] == ["pending"]
    once = client.responses.create(model="helper", previous_response_id=first.id, input=answer(request.id))
    assert once.output_text == "Sent."


def test_the_same_answer_sent_twice_at_once(app: InProcessApp, model: ScriptedModelServer) -> None:
    """Two identical answers arriving together (a client retrying on a slow network): one decision, one email, the
    same next response for both."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))

    async def scenario() -> tuple[object, object, str]:
        async with async_client(app) as client:
            first = await client.responses.create(model="helper", input="Email Bob")
            [request] = first.output
            one, two = await asyncio.gather(
                *(
                    client.responses.create(model="helper", previous_response_id=first.id, input=answer(request.id))
                    for _ in range(2)
                )
            )
            return one, two, first.id

    one, two, first_id = asyncio.run(scenario())
    assert one.id == two.id and one.output_text == two.output_text == "Sent."  # type: ignore[attr-defined]
    app.settle()
    assert app.effects(app.view(run_of(first_id))["session_id"], "email") == [EMAIL_BOB]


def test_an_answer_after_the_approval_expired(app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    """Late: the approval timed out (virtual clock) and the run went on without the call; the answer is refused,
    the turn the run went on with is there to read."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "I could not send it."))
    first = client.responses.create(model="helper", input="Email Bob")
    [request] = first.output
    app.advance(86_401)
    with pytest.raises(openai.APIStatusError) as late:
        client.responses.create(model="helper", previous_response_id=first.id, input=answer(request.id))
    assert late.value.status_code == 410
    assert late.value.body["param"] == "input[0]" and late.value.body["code"] == "approval_expired"  # type: ignore[index]
    rest = client.responses.retrieve(f"{first.id}_2")
    assert (rest.status, rest.output_text, rest.previous_response_id) == ("completed", "I could not send it.", first.id)
    [expired, _] = rest.output
    assert expired.type == "mcp_call" and "no decision before the approval deadline" in expired.error.content[0]["text"]
    assert app.effects(app.view(run_of(first.id))["session_id"], "email") == []
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(f"{first.id}_3")


def test_a_batch_answered_one_request_at_a_time(app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    """Two calls ask for approval at once: answering one gives a response that lists the request still open; the
    answer to that one continues the run (the next response has the same id: it is the same turn)."""
    both = Reply(
        tool_calls=[*Reply.call("send_email", EMAIL_BOB).tool_calls, *Reply.call("send_email", EMAIL_EVE).tool_calls]
    )
    model.set_script(Script.of(both, "Bob's went out, Eve's did not."))
    first = client.responses.create(model="helper", input="Email both")
    by_to = {json.loads(item.arguments)["to"]: item.id for item in first.output}
    assert set(by_to) == {"bob@example.com", "eve@example.com"}

    partial = client.responses.create(
        model="helper", previous_response_id=first.id, input=answer(by_to["bob@example.com"])
    )
    assert partial.status == "completed"
    assert [(i.type, i.id) for i in partial.output if i.type == "mcp_approval_request"] == [
        ("mcp_approval_request", by_to["eve@example.com"])
    ]
    rest = client.responses.create(
        model="helper", previous_response_id=partial.id, input=answer(by_to["eve@example.com"], approve=False)
    )
    assert rest.id == partial.id and rest.output_text == "Bob's went out, Eve's did not."
    calls = {json.loads(i.arguments)["to"]: i for i in rest.output if i.type == "mcp_call"}
    assert calls["bob@example.com"].error is None and calls["eve@example.com"].error is not None
    assert app.effects(app.view(run_of(first.id))["session_id"], "email") == [EMAIL_BOB]


@pytest.fixture
def crashable(tmp_path: Path, model: ScriptedModelServer, store_settings: dict[str, str]) -> Iterator[CrashableApp]:
    crashing = CrashableApp(tmp_path, model, store_settings)
    crashing.host.start()
    try:
        yield crashing
    finally:
        crashing.host.close()


@pytest.mark.slow
def test_an_answer_across_a_host_kill(crashable: CrashableApp, model: ScriptedModelServer) -> None:
    """The host is killed (SIGKILL) while the run waits for the answer; after the restart the answer continues the
    same run and the tool runs once."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))

    def client() -> OpenAI:
        http = httpx.Client(timeout=300, trust_env=False)
        return OpenAI(base_url=f"{crashable.host.base_url}/api/v1", api_key="unused", http_client=http, max_retries=0)

    with client() as before:
        first = before.responses.create(model="helper", input="Email Bob")
    [request] = first.output
    assert request.type == "mcp_approval_request"

    crashable.crash_and_restart()

    with client() as after:
        assert after.responses.retrieve(first.id).output[0].id == request.id  # the turn survived, still answerable
        rest = after.responses.create(model="helper", previous_response_id=first.id, input=answer(request.id))
    assert (rest.status, rest.output_text, run_of(rest.id)) == ("completed", "Sent.", run_of(first.id))
    session_id = crashable.api.view(run_of(first.id))["session_id"]
    _, effects = crashable.stored(session_id)
    assert [(e.kind, e.payload) for e in effects] == [("email", EMAIL_BOB)]
    assert model.log.total == 2


@pytest.mark.slow
def test_a_stream_cut_by_a_host_kill_resumes_after_the_restart(
    crashable: CrashableApp, model: ScriptedModelServer
) -> None:
    """The host is killed (SIGKILL) while a streamed response waits for the model: the client's connection dies with
    it. After the restart the model call is redelivered, and `starting_after` the last event the client had gives
    exactly the rest: together one well-formed stream, numbered without a gap, ending `response.completed`."""
    model.set_script(Script(default=Reply(text=STREAMED_ANSWER)))
    model.hold_answers()  # the kill must come while the model call is in flight (a latency would race it)
    http = httpx.Client(timeout=300, trust_env=False)
    with OpenAI(base_url=f"{crashable.host.base_url}/api/v1", api_key="unused", http_client=http,
                max_retries=0) as before:
        stream = before.responses.create(model="helper", input="a long story", stream=True, background=True)
        first = read_until(iter(stream), "response.in_progress")
        model.log.wait_for(1, timeout=PROGRESS_TIMEOUT_S)  # call_model is running
        crashable.crash_and_restart()
        cut: list[object] = []
        with contextlib.suppress(httpx.HTTPError, openai.APIError):
            cut.extend(stream)  # the host died under the stream: a broken chunked body, or an early end
        assert cut == []  # nothing came after `response.in_progress`: no terminal event reached the client
    model.release_answers()
    response_id = first[0].response.id

    http = httpx.Client(timeout=300, trust_env=False)
    with OpenAI(base_url=f"{crashable.host.base_url}/api/v1", api_key="unused", http_client=http,
                max_retries=0) as after:
        rest = list(after.responses.retrieve(response_id, stream=True, starting_after=first[-1].sequence_number))
    check_events(first + rest)
    assert rest[-1].type == "response.completed" and rest[-1].response.id == response_id
    assert deltas(rest) == STREAMED_ANSWER == rest[-1].response.output_text
    assert model.log.total == 2  # the model call was redelivered once; the answer is stored once
    messages, _ = crashable.stored(crashable.api.view(run_of(response_id))["session_id"])
    assert [m.role for m in messages] == ["user", "assistant"]


def test_events_of_a_real_run(app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    """The streaming event mapping fed what a transport would see of a real run (here: GET polls of a background
    response): the official client's stream accumulator takes every event, the deltas join to the final text, and
    a stream resumed from the last look alone continues exactly where a dropped one stopped."""
    from openai import omit
    from openai._models import construct_type
    from openai.lib.streaming.responses._responses import ResponseStreamState
    from openai.types.responses import ResponseStreamEvent

    # Imported while the host runs, as the host's own modules (see InProcessApp.max_body_bytes).
    events_module = importlib.import_module("http_api.openai_responses.events")
    models_module = sys.modules["http_api.openai_responses.models"]
    text = "The value of a is value-of-a; " * 8
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), text))
    response = client.responses.create(model="helper", input="What is a?", background=True)
    stream = events_module.ResponseEventStream()
    events: list[dict[str, object]] = []
    looks = []
    while not stream.finished:
        look = models_module.ResponseObject.model_validate(app.http.get(f"/api/v1/responses/{response.id}").json())
        looks.append(look)
        events += stream.feed(look)
        if not stream.finished:
            app.host.wait_until_idle(5)
    state: ResponseStreamState[object] = ResponseStreamState(input_tools=[], text_format=omit)
    for event in events:
        state.handle_event(construct_type(type_=ResponseStreamEvent, value=event))  # type: ignore[arg-type]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.mcp_call.completed" in kinds
    deltas = "".join(str(e["delta"]) for e in events if e["type"] == "response.output_text.delta")
    assert deltas == text == client.responses.retrieve(response.id).output_text
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    resumed = events_module.ResponseEventStream(starting_after=5).feed(looks[-1])
    assert [e["type"] for e in resumed] == kinds[6:]


def test_stateless_input_lists(app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    """The whole conversation sent again (earlier outputs as input, no previous_response_id) continues it: the
    repeated items are recognised, only the new message is stored; a list that changes a stored item is refused
    naming it."""
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), "a is value-of-a.", "b is next."))
    first = client.responses.create(model="helper", input="What is a?")
    history: list[object] = [{"role": "user", "content": "What is a?"}]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    second = client.responses.create(model="helper", input=[*history, {"role": "user", "content": "And b?"}])
    assert second.output_text == "b is next." and second.previous_response_id == first.id
    session_id = app.view(run_of(first.id))["session_id"]
    assert app.view(run_of(second.id))["session_id"] == session_id
    users = [m for m in app.session_messages(session_id) if m["role"] == "user"]
    assert len(users) == 2  # the repeated message is not stored twice
    assert [m["content"] for m in model.log.last.messages if m["role"] == "user"] == ["What is a?", "And b?"]

    forged = [*history[:2], {**history[2], "content": [{"type": "output_text", "text": "a is 42."}]}]  # type: ignore[dict-item]
    with pytest.raises(openai.BadRequestError) as error:
        client.responses.create(model="helper", input=[*forged, {"role": "user", "content": "And c?"}])
    assert error.value.body["param"] == "input[2]"  # type: ignore[index]
    assert error.value.body["code"] == "input_contradicts_conversation"  # type: ignore[index]
    # A branch from the middle of a conversation that went on: refused (a durable session has one history).
    with pytest.raises(openai.BadRequestError) as branch:
        client.responses.create(model="helper", input=[*history, {"role": "user", "content": "Or c?"}])
    assert branch.value.body["param"] == "input[3]"  # type: ignore[index]


def test_the_agents_own_tools_as_a_hosted_mcp_tool(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    """`tools: [{"type": "mcp", "server_label": <agent>}]` is accepted: `allowed_tools` narrows what the model is
    offered, `require_approval` adds approvals, and `never` does not loosen the server's policy."""
    mcp = {"type": "mcp", "server_label": "helper"}
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), "ok"))
    narrowed = client.responses.create(
        model="helper", input="What is a?", tools=[{**mcp, "allowed_tools": ["lookup"], "require_approval": "always"}]
    )
    assert model.log.last.tool_names == ["lookup"]  # only the allowed tool was offered
    [request] = narrowed.output  # lookup needs no approval on the server: the client asked for one
    assert (request.type, request.name) == ("mcp_approval_request", "lookup")
    assert narrowed.tools[0].type == "mcp" and narrowed.tools[0].allowed_tools == ["lookup"]  # type: ignore[union-attr]
    done = client.responses.create(
        model="helper", previous_response_id=narrowed.id, input=answer(request.id), tools=narrowed.tools  # type: ignore[arg-type]
    )
    assert done.output_text == "ok"

    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "never sent"))
    loose = client.responses.create(
        model="helper", input="Email Bob", tools=[{**mcp, "require_approval": "never"}]  # type: ignore[list-item]
    )
    assert [item.type for item in loose.output] == ["mcp_approval_request"]  # the server's policy still holds
    assert app.effects(app.view(run_of(loose.id))["session_id"], "email") == []
    app.cancel(run_of(loose.id))
    app.settle()


def test_tools_that_are_not_the_agents_are_refused(app: InProcessApp, model: ScriptedModelServer) -> None:
    """Nothing is ever fetched: a remote MCP server, a connector, credentials, client-side functions, another
    label - each a 400 naming the field and saying why."""
    model.set_script(Script.of("never"))
    mcp = {"type": "mcp", "server_label": "helper"}
    cases = [
        ({**mcp, "server_url": "http://127.0.0.1:9/mcp"}, "tools[0].server_url", "connects to no MCP server"),
        ({**mcp, "connector_id": "connector_gmail"}, "tools[0].connector_id", "connects to no MCP server"),
        ({**mcp, "headers": {"Authorization": "Bearer x"}}, "tools[0].headers", "connects to no MCP server"),
        ({"type": "function", "name": "f", "parameters": {}}, "tools[0].type", "run on the server"),
        ({"type": "web_search"}, "tools[0].type", "run on the server"),
        ({**mcp, "server_label": "other"}, "tools[0].server_label", "agent's own tools"),
        ({**mcp, "allowed_tools": ["nope"]}, "tools[0].allowed_tools", "has no tool 'nope'"),
    ]
    for tool, param, says in cases:
        http = app.http.post("/api/v1/responses", json={"model": "helper", "input": "hi", "tools": [tool]})
        assert http.status_code == 400, (tool, http.text)
        error = http.json()["error"]
        assert error["param"] == param and says in error["message"], (tool, error)
    assert model.log.total == 0


@watches_the_app_in_process
def test_a_cancel_that_another_cancel_beat_is_a_no_op(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two clients cancel a response at once: the other's cancel ends the run after this one read it running, so this
    one's event is refused (the orchestration is over). Cancelling a cancelled response is a no-op: this client gets
    the cancelled response too, not a 409."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Hello again."))
    first = client.responses.create(model="helper", input="Email Bob", background=True)
    app.settle()
    gateway = app.app_module("http_api.durable_gateway").DurableGateway
    send_cancel = gateway.send_cancel

    async def another_cancel_first(self: Any, instance_id: str, reason: str | None) -> None:
        await send_cancel(self, instance_id, reason)  # the other client's, delivered first
        await until_completed(self, instance_id)
        await send_cancel(self, instance_id, reason)  # this one's: refused, the run has ended

    monkeypatch.setattr(gateway, "send_cancel", another_cancel_first)
    cancelled = client.responses.cancel(first.id)
    monkeypatch.undo()
    assert (cancelled.id, cancelled.status) == (first.id, "cancelled")


def waiting_for_approval(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer, then: str
) -> tuple[Response, Any]:
    """A background response whose run waits for the approval of one email (then answers `then`), as retrieved:
    `completed` with its `mcp_approval_request`."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), then))
    first = client.responses.create(model="helper", input="Email Bob", background=True)
    app.settle()
    waiting = client.responses.retrieve(first.id)
    [request] = waiting.output
    assert (waiting.status, request.type) == ("completed", "mcp_approval_request")
    return waiting, request


def test_cancel_while_waiting_for_an_answer(app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    """A background response waiting for its approval answer, cancelled: the response the client holds says
    `cancelled` (cancel's answer and retrieve), no later response appears, the conversation continues from it, and
    answering the closed request says the run is over (409 run_finished, not 410 expired)."""
    first, request = waiting_for_approval(app, client, model, then="Hello again.")
    raw = app.http.get(f"/api/v1/responses/{first.id}").json()  # integers, as OpenAI sends them
    assert isinstance(raw["created_at"], int) and isinstance(raw["completed_at"], int)
    assert raw["completed_at"] >= raw["created_at"]

    cancelled = client.responses.cancel(first.id)
    assert (cancelled.id, cancelled.status) == (first.id, "cancelled")
    app.settle()
    again = client.responses.retrieve(first.id)
    assert again.status == "cancelled" and again.completed_at
    assert_official_shape(app, first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(f"{first.id}_2")  # no response the client never saw

    with pytest.raises(openai.ConflictError) as late:
        client.responses.create(model="helper", previous_response_id=first.id, input=answer(request.id))
    assert late.value.body["code"] == "run_finished" and late.value.body["param"] == "input[0]"  # type: ignore[index]
    decided = app.decide(run_of(first.id), request.id, "approve")
    assert (decided.status_code, decided.json()["code"]) == (409, "run_finished")

    follow_up = client.responses.create(model="helper", previous_response_id=first.id, input="Just say hello.")
    assert (follow_up.output_text, follow_up.previous_response_id) == ("Hello again.", first.id)
    assert app.effects(app.view(run_of(first.id))["session_id"], "email") == []


def test_models_are_the_agents(app: InProcessApp, client: OpenAI) -> None:
    """`models.list()` / `models.retrieve()` as OpenAI answers them: the agents this app serves."""
    models = client.models.list()
    names = [m.id for m in models.data]
    assert "helper" in names and names == [a["name"] for a in app.http.get("/api/agents").json()["agents"]]
    assert {(m.object, m.owned_by) for m in models.data} == {("model", "durable-agents")}
    one = client.models.retrieve("helper")
    assert (one.id, one.object, isinstance(one.created, int)) == ("helper", "model", True)
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("nobody")
    assert missing.value.body["code"] == "model_not_found"  # type: ignore[index]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/nowhere"),
        ("POST", "/api/runs/0123/nothing/here"),
        ("PUT", "/api/agents"),
        ("DELETE", "/api/health"),
        ("PATCH", "/api/sessions"),
        ("GET", "/api/v1/nowhere"),
        ("POST", "/api/v1/chat/completions"),
        ("GET", "/api/v1"),
    ],
)
def test_every_unknown_route_answers_in_the_apis_error_shape(app: InProcessApp, method: str, path: str) -> None:
    """A path (or method) the app does not serve: 404 with a body, problem+json, or OpenAI's error shape under
    /api/v1 - and the catch-all shadows no real route (the routes next to it still answer)."""
    response = app.http.request(method, path)
    assert response.status_code == 404, response.text
    if path.startswith("/api/v1"):
        error = response.json()["error"]
        assert (error["type"], error["message"]) == ("invalid_request_error", f"Invalid URL ({method} {path[4:]})")
    else:
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["code"] == "route_not_found" and path in response.json()["detail"]
    assert app.http.get("/api/health").status_code == 200
    assert app.http.get("/api/agents/helper").status_code == 200
    assert app.http.get("/api/v1/models/helper").status_code == 200
    assert app.http.get(f"/api/runs/{'0' * 32}").json()["code"] == "run_not_found"  # its own 404, not the fallback


def test_include_on_create_and_retrieve(app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    """`include` is read, on create and on retrieve (`include[]` in the query, every value): values naming items a
    response here never has change nothing; logprobs, which no agent model reports, are refused by name; an unknown
    value is OpenAI's 400 `invalid_value`."""
    model.set_script(Script.of("Plain answer.", "Second answer."))
    created = client.responses.create(model="helper", input="hi")
    again = client.responses.retrieve(created.id, include=["file_search_call.results", "reasoning.encrypted_content"])
    assert again.model_dump(exclude={"background"}) == created.model_dump(exclude={"background"})  # GET: not stored
    [item] = client.responses.input_items.list(created.id, include=["file_search_call.results"]).data
    assert item.type == "message"
    for include, param, code in [
        (["message.output_text.logprobs"], "include[0]", "unsupported_parameter"),
        (["file_search_call.results", "no.such.value"], "include[1]", "invalid_value"),
    ]:
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.retrieve(created.id, include=include)  # type: ignore[arg-type]
        assert (refused.value.body["param"], refused.value.body["code"]) == (param, code)  # type: ignore[index]
        assert refused.value.body["type"] == "invalid_request_error"  # type: ignore[index]
        with pytest.raises(openai.BadRequestError) as on_items:
            client.responses.input_items.list(created.id, include=include)  # type: ignore[arg-type]
        assert on_items.value.body["param"] == param  # type: ignore[index]
        with pytest.raises(openai.BadRequestError) as on_stream:
            client.responses.retrieve(created.id, include=include, stream=True)  # type: ignore[arg-type]
        assert on_stream.value.body["param"] == param  # type: ignore[index]
        with pytest.raises(openai.BadRequestError) as on_create:
            client.responses.create(model="helper", input="hi", include=include)  # type: ignore[arg-type]
        assert (on_create.value.body["param"], on_create.value.body["code"]) == (param, code)  # type: ignore[index]
    with_include = client.responses.create(model="helper", input="hi", include=["reasoning.encrypted_content"])
    assert with_include.output_text == "Second answer."


def test_every_value_of_a_repeated_query_name_counts(app: InProcessApp, client: OpenAI,
                                                    model: ScriptedModelServer) -> None:
    """The query as OpenAI clients send lists (`include[]=a&include[]=b`), over plain HTTP: every `include[]` value is
    read, each exactly as sent (a comma inside one is part of it), and a single-valued parameter sent twice is not
    silently read as one of its values but refused by name (Azure's Functions host passes it as "v1,v2")."""
    model.set_script(Script.of("Plain answer."))
    created = client.responses.create(model="helper", input="hi")
    base = f"/api/v1/responses/{created.id}"
    both = app.http.get(f"{base}?include[]=file_search_call.results&include[]=reasoning.encrypted_content")
    assert both.status_code == 200 and both.json()["id"] == created.id
    for query, param, code in [
        ("include[]=file_search_call.results&include[]=message.output_text.logprobs", "include[1]",
         "unsupported_parameter"),
        ("include[]=message.output_text.logprobs&include[]=file_search_call.results", "include[0]",
         "unsupported_parameter"),
        ("include[]=file_search_call.results%2Creasoning.encrypted_content", "include[0]", "invalid_value"),
    ]:
        for path in (base, f"{base}/input_items"):
            refused = app.http.get(f"{path}?{query}")
            assert refused.status_code == 400, refused.text
            assert (refused.json()["error"]["param"], refused.json()["error"]["code"]) == (param, code), query
    items = app.http.get(f"{base}/input_items?limit=1&limit=50")
    assert items.status_code == 400 and items.json()["error"]["param"] == "limit", items.text
    assert app.http.get(f"{base}/input_items?limit=1").json()["data"][0]["type"] == "message"


def test_polling_the_turns_of_an_approval(app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    """A client polling GET while its run waits for a decision, then while the next turn runs: the turn that asked
    is `completed` with its `mcp_approval_request` (as the stream ends it), the next turn does not exist before a
    decision (404, as a response nobody created yet), then is `in_progress` with the approved call, then `completed`;
    the asking turn never changes."""
    first, request = waiting_for_approval(app, client, model, then="Sent.")
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(f"{first.id}_2")  # before a decision: no such response yet
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(f"{first.id}_2", stream=True)
    streamed = [event.type for event in client.responses.retrieve(first.id, stream=True)]
    assert streamed[-1] == "response.completed" and "response.output_item.added" in streamed

    model.hold_answers()  # the next turn's model call stays in flight
    try:
        decided = app.decide(run_of(first.id), request.id, "approve")  # an approver on the run routes
        assert decided.status_code == 202, decided.text
        model.log.wait_for(2, timeout=PROGRESS_TIMEOUT_S)
        running = client.responses.retrieve(f"{first.id}_2")
        assert (running.status, running.previous_response_id, running.completed_at) == ("in_progress", first.id, None)
        [call] = running.output
        assert (call.type, call.approval_request_id, call.status) == ("mcp_call", request.id, "completed")
        assert client.responses.retrieve(first.id) == first  # its usage too: its own call's, not the run's so far
    finally:
        model.release_answers()
    app.settle()
    done = client.responses.retrieve(f"{first.id}_2")
    assert (done.status, done.output_text) == ("completed", "Sent.")
    assert client.responses.retrieve(first.id) == first  # the same turn, its usage too
    assert_official_shape(app, f"{first.id}_2")



def test_stateless_function_calls_go_back_with_all_their_outputs(
    app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    """A stateless input list may repeat a model turn's tool calls as function_call + function_call_output items:
    with every output it continues the conversation (it was refused: each output passed over the next stored
    item); with only some of them it is OpenAI's 400 for a call without its output."""
    both = [*Reply.call("lookup", {"key": "a"}).tool_calls, *Reply.call("lookup", {"key": "b"}).tool_calls]
    model.set_script(Script.of(Reply(tool_calls=both), "a and b.", "Next."))
    first = client.responses.create(model="helper", input="What are a and b?")
    calls = [item for item in first.output if item.type == "mcp_call"]
    made: list[Any] = [
        {"type": "function_call", "call_id": c.id.removeprefix("mcp_"), "name": c.name, "arguments": c.arguments}
        for c in calls
    ]
    outputs: list[Any] = [
        {"type": "function_call_output", "call_id": c.id.removeprefix("mcp_"), "output": c.output} for c in calls
    ]
    answer = [item.model_dump(exclude_none=True) for item in first.output if item.type == "message"]
    start: list[Any] = [{"role": "user", "content": "What are a and b?"}, *made]
    follow_up = {"role": "user", "content": "Next?"}
    with pytest.raises(openai.BadRequestError) as partial:
        client.responses.create(model="helper", input=[*start, outputs[0], *answer, follow_up])
    assert partial.value.body == {  # type: ignore[comparison-overlap]
        "message": f"No tool output found for function call {made[1]['call_id']}.",
        "type": "invalid_request_error",
        "param": "input[2]",
        "code": "tool_output_missing",
    }
    second = client.responses.create(model="helper", input=[*start, *outputs, *answer, follow_up])
    assert (second.output_text, second.previous_response_id) == ("Next.", first.id)
