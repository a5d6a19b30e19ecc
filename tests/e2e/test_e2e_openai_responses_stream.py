"""Streamed responses (`stream: true`) and resumed streams (`GET /responses/{id}?stream=true&starting_after=N`) of the
OpenAI Responses API, read with the official `openai` client (sync and async, its own SSE parser and typed events)
over real HTTP from the app on devhost: text deltas that join to the final text, sequence numbers from 0 without a
gap, a dropped stream resumed with exactly the rest (the same events an uninterrupted client got), background streams
that outlive their client, approvals and their answers streamed, failures and cancels as terminal events, one watcher
per run, and the bad combinations refused before a stream starts. Also: the Azure OpenAI client, which adds
`api-version` to every request and whose `api-key` header is not a Functions key (the function key goes in
`x-functions-key`).

Timing is controlled with the scripted model's holds (`hold_answers`, `hold_mid_stream`, `release_answers`) and the
slow step's release file, never with sleeps.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from e2e_harness import PROGRESS_TIMEOUT_S, InProcessApp, wait_for_file
from e2e_settings import app_settings, running_app
from openai import AsyncOpenAI, AzureOpenAI, OpenAI, Stream
from openai.types.responses import ResponseStreamEvent
from step_pause import paused

from scripted_model import Fault, Reply, Script, ScriptedModelServer

ANSWER = " ".join(f"word{i}" for i in range(80)) + "."
EMAIL_BOB = {"to": "bob@example.com", "subject": "Hi", "body": "Hello Bob"}
# The event class the SDK has for each event type (its union, discriminated by `type`).
EVENT_CLASSES = {
    typing.get_args(cls.model_fields["type"].annotation)[0]: cls
    for cls in typing.get_args(typing.get_args(ResponseStreamEvent)[0])
}
TERMINAL = ("response.completed", "response.failed", "response.incomplete")


@pytest.fixture
def stream_app(model: ScriptedModelServer, marker_dir: Path) -> Iterator[InProcessApp]:
    env = app_settings(model.base_url, SESSION_STORE_PATH=":memory:", E2E_MARKER_DIR=str(marker_dir),
                       STREAM_PING_SECONDS="0.2")
    with running_app(env, "sqlite") as app:
        yield app


def sync_client(app: InProcessApp, **options: Any) -> OpenAI:
    http = httpx.Client(timeout=PROGRESS_TIMEOUT_S, trust_env=False)
    return OpenAI(base_url=f"{app.host.base_url}/api/v1", api_key="unused", http_client=http, max_retries=0,
                  **options)


def async_client(app: InProcessApp) -> AsyncOpenAI:
    http = httpx.AsyncClient(timeout=PROGRESS_TIMEOUT_S, trust_env=False)
    return AsyncOpenAI(base_url=f"{app.host.base_url}/api/v1", api_key="unused", http_client=http, max_retries=0)


@pytest.fixture
def client(stream_app: InProcessApp) -> Iterator[OpenAI]:
    with sync_client(stream_app) as c:
        yield c


def run_of(response_id: str) -> str:
    return response_id.removeprefix("resp_").split("_")[0]


def read_until(events: Iterator[Any], stop: str) -> list[Any]:
    seen = []
    for event in events:
        seen.append(event)
        if event.type == stop:
            return seen
    raise AssertionError(f"the stream ended before {stop}: {[e.type for e in seen]}")


def check_events(events: list[Any], first: int = 0) -> None:
    """What every stream must be: the SDK's own typed events (each validates as its class), numbered from `first`
    without a gap, each item's events in their order, one terminal event, last."""
    for event in events:
        cls = EVENT_CLASSES[event.type]
        assert type(event) is cls, (event.type, type(event))
        cls.model_validate(event.to_dict())  # strictly, not only constructed
    assert [e.sequence_number for e in events] == list(range(first, first + len(events)))
    kinds = [e.type for e in events]
    assert [k for k in kinds if k in TERMINAL] == kinds[-1:] and kinds[-1] in TERMINAL
    if first == 0:
        assert kinds[:2] == ["response.created", "response.in_progress"]
    items: dict[int, list[str]] = {}
    for event in events:
        if hasattr(event, "output_index"):
            items.setdefault(event.output_index, []).append(event.type)
    for kinds_of_item in items.values():
        if first == 0:
            assert kinds_of_item[0] == "response.output_item.added", kinds_of_item
        assert "response.output_item.added" not in kinds_of_item[1:], kinds_of_item
        if "response.output_item.done" in kinds_of_item:
            assert kinds_of_item[-1] == "response.output_item.done", kinds_of_item


def deltas(events: list[Any]) -> str:
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


def wire(events: list[Any]) -> list[tuple[str, int, str | None]]:
    return [(e.type, e.sequence_number, getattr(e, "delta", None)) for e in events]


def wait_for_model_calls(model: ScriptedModelServer, count: int) -> None:
    deadline = time.monotonic() + PROGRESS_TIMEOUT_S
    while len(model.log.requests) < count:
        assert time.monotonic() < deadline, "the model was not called"
        time.sleep(0.01)


# ----------------------------------------------------------------------------------------------- streaming


def test_a_streamed_response(stream_app: InProcessApp, client: OpenAI, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), ANSWER))
    with client.responses.create(model="helper", input="What is a?", stream=True) as stream:
        assert stream.response.headers["content-type"].startswith("text/event-stream")
        events = list(stream)
    check_events(events)
    completed = events[-1]
    assert completed.type == "response.completed" and completed.response.status == "completed"
    assert deltas(events) == ANSWER == completed.response.output_text
    assert len([e for e in events if e.type == "response.output_text.delta"]) > 1
    [done_text] = [e.text for e in events if e.type == "response.output_text.done"]
    assert done_text == ANSWER
    kinds = [e.type for e in events]
    assert kinds.index("response.mcp_call.completed") < kinds.index("response.output_text.delta")
    call, message = completed.response.output
    assert (call.type, call.name, message.type) == ("mcp_call", "lookup", "message")
    # The streamed response is the response: GET says the same.
    assert client.responses.retrieve(completed.response.id).output_text == ANSWER


def test_a_streamed_response_async_through_the_stream_helper(
    stream_app: InProcessApp, model: ScriptedModelServer
) -> None:
    model.set_script(Script.of(ANSWER))

    async def scenario() -> tuple[list[Any], Any]:
        async with async_client(stream_app) as client:
            async with client.responses.stream(model="helper", input="Tell me") as stream:
                events = [event async for event in stream]
                final = await stream.get_final_response()
            return events, final

    events, final = asyncio.run(scenario())
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert deltas(events) == ANSWER == final.output_text
    # The helper's own accumulated snapshot of each delta ends with the whole text.
    assert [e.snapshot for e in events if e.type == "response.output_text.delta"][-1] == ANSWER


def test_a_dropped_stream_resumes_with_exactly_the_rest(
    stream_app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    """The first client leaves mid-answer (the answer is held half-written); a second resumes after the last event
    it had; a third stayed connected throughout: the first two together are the third, event for event."""
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), ANSWER))
    model.hold_mid_stream(after_chunks=12)
    first_stream = client.responses.create(model="helper", input="a long story", stream=True, background=True)
    first = read_until(iter(first_stream), "response.output_text.delta")
    response_id = first[0].response.id
    assert first[0].response.background is True
    whole_stream = client.responses.retrieve(response_id, stream=True)  # from the start, kept open
    whole = iter(whole_stream)
    first_stream.close()  # the client goes; the run does not (background)
    model.release_answers()
    rest = list(client.responses.retrieve(response_id, stream=True, starting_after=first[-1].sequence_number))
    uninterrupted = read_until(whole, "response.completed")
    whole_stream.close()

    check_events(first + rest)
    check_events(rest, first=first[-1].sequence_number + 1)
    assert rest[-1].type == "response.completed"
    assert wire(first + rest) == wire(uninterrupted)
    assert deltas(first) and ANSWER.startswith(deltas(first))
    assert deltas(first + rest) == ANSWER == rest[-1].response.output_text
    assert rest[-1].response.output == uninterrupted[-1].response.output
    # After the last event there is nothing more: the stream ends at once.
    assert list(client.responses.retrieve(response_id, stream=True, starting_after=rest[-1].sequence_number)) == []


def test_resume_async_and_from_the_start(stream_app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of("Short and done."))

    async def scenario() -> tuple[list[Any], list[Any], list[Any]]:
        async with async_client(stream_app) as client:
            stream = await client.responses.create(model="helper", input="hi", stream=True)
            events = [event async for event in stream]
            response_id = events[0].response.id
            again = [e async for e in await client.responses.retrieve(response_id, stream=True)]
            after = [e async for e in await client.responses.retrieve(response_id, stream=True, starting_after=2)]
            return events, again, after

    events, again, after = asyncio.run(scenario())
    check_events(events)
    assert wire(again) == wire(events)  # a finished response replays the same events
    assert wire(after) == wire(events)[3:]


def test_a_call_waiting_for_approval_never_shows_as_running(
    stream_app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    """Read while the run records its approval requests (held there: `step_pause`), the answer's call is not shown
    yet; shown earlier it was an `mcp_call` under way that a stream then replaced with the request at the same place
    (a second `output_item.added` for one item). The stream opened in that moment sends one item: the request."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    streamed: list[Any] = []
    with paused(stream_app, "put_approvals") as recording:
        created = client.responses.create(model="helper", input="Email Bob", background=True)
        recording.wait_reached()
        during = client.responses.retrieve(created.id)
        assert (during.status, during.output) == ("in_progress", [])
        with client.responses.retrieve(created.id, stream=True) as stream:
            events = iter(stream)
            streamed += read_until(events, "response.in_progress")  # the watcher has looked at the held run
            reader = threading.Thread(target=lambda: streamed.extend(events), daemon=True)
            reader.start()
            recording.release()
            reader.join(PROGRESS_TIMEOUT_S)
    check_events(streamed)
    added = [e.item for e in streamed if e.type == "response.output_item.added"]
    assert [i.type for i in added] == ["mcp_approval_request"]
    assert streamed[-1].response.status == "completed"


def test_background_stream_outlives_its_client(
    stream_app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    model.set_script(Script.of("Finished without anyone watching."))
    model.hold_answers()
    with client.responses.create(model="helper", input="hi", stream=True, background=True) as stream:
        created = next(iter(stream))
    assert created.type == "response.created" and created.response.status in ("queued", "in_progress")
    model.release_answers()
    stream_app.settle()
    assert client.responses.retrieve(created.response.id).output_text == "Finished without anyone watching."
    replay = list(client.responses.retrieve(created.response.id, stream=True, starting_after=0))
    check_events(replay, first=1)
    assert deltas(replay) == "Finished without anyone watching."


# ----------------------------------------------------------------------------------------------- approvals, ends


def test_an_approval_in_a_stream_and_its_answer_streamed(
    stream_app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    with client.responses.create(model="helper", input="Email Bob", stream=True) as stream:
        events = list(stream)
    check_events(events)
    completed = events[-1].response
    assert completed.status == "completed"
    [request] = completed.output
    assert request.type == "mcp_approval_request" and json.loads(request.arguments) == EMAIL_BOB
    added = [e.item for e in events if e.type == "response.output_item.added"]
    assert [(i.type, i.id) for i in added] == [("mcp_approval_request", request.id)]

    # Early: the next turn has no stream before the answer starts it.
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(f"{completed.id}_3", stream=True)

    answer = [{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}]
    with client.responses.create(model="helper", previous_response_id=completed.id, input=answer,
                                 stream=True) as stream:
        rest = list(stream)
    check_events(rest)
    second = rest[-1].response
    assert (second.id, second.previous_response_id) == (f"{completed.id}_2", completed.id)
    assert run_of(second.id) == run_of(completed.id)  # the same durable run went on
    assert (second.status, second.output_text, deltas(rest)) == ("completed", "Sent.", "Sent.")
    kinds = [e.type for e in rest]
    assert "response.mcp_call.completed" in kinds
    call = next(e.item for e in rest if e.type == "response.output_item.done" and e.item.type == "mcp_call")
    assert (call.name, call.approval_request_id) == ("send_email", request.id)
    view = stream_app.view(run_of(second.id))
    assert stream_app.effects(view["session_id"], "email") == [EMAIL_BOB]


def test_the_same_answer_streamed_twice_at_once(stream_app: InProcessApp, model: ScriptedModelServer) -> None:
    """Two identical streamed answers arriving together (a client retrying): one decision, one email, and both
    streams are the same next response, event for event."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))

    async def scenario() -> tuple[str, list[Any], list[Any]]:
        async with async_client(stream_app) as client:
            first = await client.responses.create(model="helper", input="Email Bob")
            [request] = first.output
            answer = [{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}]

            async def streamed() -> list[Any]:
                stream = await client.responses.create(model="helper", previous_response_id=first.id, input=answer,
                                                       stream=True)
                return [event async for event in stream]

            one, two = await asyncio.gather(streamed(), streamed())
            return first.id, one, two

    first_id, one, two = asyncio.run(scenario())
    check_events(one)
    assert wire(one) == wire(two) and one[-1].response.output == two[-1].response.output
    assert (one[-1].response.id, one[-1].response.output_text) == (f"{first_id}_2", "Sent.")
    stream_app.settle()
    assert stream_app.effects(stream_app.view(run_of(first_id))["session_id"], "email") == [EMAIL_BOB]


def test_a_failing_run_streams_response_failed(
    stream_app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    model.set_script(Script.of(Reply.fail(Fault.bad_request("the prompt is not allowed"))))
    with client.responses.create(model="helper", input="hi", stream=True) as stream:
        events = list(stream)
    check_events(events)
    failed = events[-1]
    assert failed.type == "response.failed" and failed.response.status == "failed"
    assert failed.response.error is not None and "not allowed" in failed.response.error.message


def test_cancel_while_streaming_ends_the_stream(
    stream_app: InProcessApp, client: OpenAI, model: ScriptedModelServer, marker_dir: Path
) -> None:
    model.set_script(Script.of(Reply.call("slow_step", {"label": "x"}), "never"))
    with client.responses.create(model="helper", input="go", stream=True, background=True) as stream:
        events = iter(stream)
        seen = read_until(events, "response.mcp_call.in_progress")
        wait_for_file(marker_dir / "slow_step.started")
        response_id = seen[0].response.id
        cancelling = client.responses.cancel(response_id)
        (marker_dir / "slow_step.release").write_text("go")
        seen += list(events)
    assert cancelling.id == response_id
    check_events(seen)
    last = seen[-1]
    assert last.type == "response.failed" and last.response.status == "cancelled" and last.response.error is None
    assert "never" not in deltas(seen)


def test_two_streams_of_a_run_share_one_watcher(
    stream_app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    before = stream_app.live_streams()
    model.set_script(Script.of(ANSWER))
    model.hold_answers()
    response = client.responses.create(model="helper", input="hi", background=True)
    wait_for_model_calls(model, 1)
    with client.responses.retrieve(response.id, stream=True) as a, \
            client.responses.retrieve(response.id, stream=True) as b:
        events_a, events_b = iter(a), iter(b)
        first_a, first_b = next(events_a), next(events_b)
        assert first_a.to_dict() == first_b.to_dict()
        assert stream_app.live_streams(since=before) == {"watchers": 1, "subscribers": 2}
        model.release_answers()
        rest_a, rest_b = read_until(events_a, "response.completed"), read_until(events_b, "response.completed")
    assert wire([first_a, *rest_a]) == wire([first_b, *rest_b])
    assert deltas(rest_a) == ANSWER


def test_a_stream_ends_at_its_time_limit_and_the_client_resumes(
    model: ScriptedModelServer, marker_dir: Path
) -> None:
    """`STREAM_MAX_SECONDS`: the stream closes without a terminal event; `starting_after` gets the rest."""
    model.set_script(Script.of("After the limit."))
    model.hold_answers()
    env = app_settings(model.base_url, SESSION_STORE_PATH=":memory:", E2E_MARKER_DIR=str(marker_dir),
                       STREAM_MAX_SECONDS="0.3")
    with running_app(env, "sqlite") as app, sync_client(app) as client:
        first = list(client.responses.create(model="helper", input="hi", stream=True, background=True))
        assert first and first[-1].type not in TERMINAL  # the run is held: the limit ended the stream
        model.release_answers()
        rest = list(client.responses.retrieve(first[0].response.id, stream=True,
                                              starting_after=first[-1].sequence_number))
    check_events(first + rest)
    assert deltas(rest) == "After the limit."


def test_with_worker_processes_deltas_come_from_the_stored_draft(model: ScriptedModelServer, tmp_path: Path) -> None:
    """The model call runs in a worker process, the stream in the host: the watcher follows the draft the worker
    stores, and the deltas still join to the answer."""
    from e2e_settings import E2E_DIR, REPO_ROOT

    from devhost.testing import InProcessHost

    model.set_script(Script.of(ANSWER))
    model.hold_mid_stream(after_chunks=12)
    env = app_settings(model.base_url, SESSION_STORE_PATH=str(tmp_path / "sessions.sqlite3"),
                       PARTIAL_OUTPUT_INTERVAL_SECONDS="0", STREAM_WATCH_MAX_INTERVAL_SECONDS="0.2",
                       PYTHONPATH=str(E2E_DIR))
    with InProcessHost(REPO_ROOT, clock="virtual", env=env, workers=1) as host:
        client = sync_client(InProcessApp(host, "sqlite"))
        with client, client.responses.create(model="helper", input="a long story", stream=True) as stream:
            events = iter(stream)
            first = read_until(events, "response.output_text.delta")
            model.release_answers()
            rest = read_until(events, "response.completed")
    check_events(first + rest)
    assert deltas(first + rest) == ANSWER == rest[-1].response.output_text


# ----------------------------------------------------------------------------------------------- refused


def test_bad_combinations_are_refused_before_any_stream(
    stream_app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    model.set_script(Script.of("ok", "ok again"))
    done = client.responses.create(model="helper", input="hi")
    base = f"{stream_app.host.base_url}/api/v1/responses"
    cases: list[tuple[str, str, dict[str, Any], int, str, str | None]] = [
        ("GET", f"/{done.id}", {"params": {"starting_after": "3"}}, 400, "starting_after", None),
        ("GET", f"/{done.id}", {"params": {"stream": "true", "starting_after": "-1"}}, 400, "starting_after", None),
        ("GET", f"/{done.id}", {"params": {"stream": "true", "starting_after": "two"}}, 400, "starting_after", None),
        ("GET", f"/{done.id}", {"params": {"stream": "maybe"}}, 400, "stream", None),
        ("GET", f"/{done.id}", {"params": {"stream": "true", "after": "3"}}, 400, "after", "unsupported_parameter"),
        ("GET", "/resp_" + "0" * 32, {"params": {"stream": "true"}}, 404, None, "response_not_found"),
        ("POST", "", {"json": {"model": "helper", "input": "hi", "stream_options": {"include_obfuscation": False}}},
         400, "stream_options", None),
        ("POST", "", {"json": {"model": "nobody", "input": "hi", "stream": True}}, 404, "model", "model_not_found"),
    ]
    for method, path, options, status, param, code in cases:
        response = httpx.request(method, base + path, timeout=60, trust_env=False, **options)
        assert response.status_code == status, (path, options, response.text)
        assert response.headers["content-type"].startswith("application/json"), response.headers
        error = response.json()["error"]
        assert (error["param"], error["type"]) == (param, "invalid_request_error"), error
        assert code is None or error["code"] == code, error
    # Harmless: stream_options with a stream, the obfuscation switch on GET.
    with client.responses.create(model="helper", input="hi", stream=True,
                                 stream_options={"include_obfuscation": False}) as stream:
        assert [e.type for e in stream][-1] == "response.completed"
    with client.responses.retrieve(done.id, stream=True, include_obfuscation=False) as stream:
        assert [e.type for e in stream][-1] == "response.completed"


# ----------------------------------------------------------------------------------------------- the function key


def test_the_azure_openai_client_with_the_function_key(stream_app: InProcessApp, model: ScriptedModelServer) -> None:
    """`AzureOpenAI` sends its `api_key` as `api-key` (not a Functions key: the Functions host reads `x-functions-key`
    or `?code=`) and adds `?api-version=` to every request. Configured as the README says, every call goes through
    with the key where the host reads it, the API version ignored by the app; `?code=` works as well."""
    model.set_script(Script.of("Hello from Azure.", "Again.", "Third."))
    sent: list[httpx.Request] = []
    http = httpx.Client(timeout=PROGRESS_TIMEOUT_S, trust_env=False, event_hooks={"request": [sent.append]})
    with AzureOpenAI(base_url=f"{stream_app.host.base_url}/api/v1", api_key="unused", api_version="preview",
                     default_headers={"x-functions-key": "the-function-key"}, http_client=http,
                     max_retries=0) as azure:
        response = azure.responses.create(model="helper", input="hi")
        assert response.output_text == "Hello from Azure."
        assert azure.responses.retrieve(response.id).output_text == "Hello from Azure."
        assert azure.responses.input_items.list(response.id).data
        with azure.responses.create(model="helper", input="again", previous_response_id=response.id,
                                    stream=True) as stream:
            streamed: list[Any] = list(stream)
        assert isinstance(stream, Stream) and deltas(streamed) == "Again."
        assert [e.type for e in azure.responses.retrieve(streamed[0].response.id, stream=True)][-1] == (
            "response.completed")
    assert all(r.headers["x-functions-key"] == "the-function-key" for r in sent)
    assert all(r.url.params["api-version"] == "preview" for r in sent)
    with sync_client(stream_app, default_query={"code": "the-function-key"}) as by_query:
        third = by_query.responses.create(model="helper", input="third", previous_response_id=streamed[-1].response.id)
        assert by_query.responses.retrieve(third.id).output_text == "Third."
        assert by_query.responses.input_items.list(third.id).data


def test_a_lone_surrogate_in_the_answer_streams_as_a_replacement_character(
    stream_app: InProcessApp, client: OpenAI, model: ScriptedModelServer
) -> None:
    """A model may stream a lone UTF-16 surrogate (a JSON `\\ud800` escape with no pair), which UTF-8 cannot carry:
    the delta carries U+FFFD instead, the stream goes on to its terminal event, and the response's text has U+FFFD
    there too (storing the answer failed the model call on every retry, so the response failed)."""
    model.set_script(Script.of("Broken \ud800 text and more words"))
    model.hold_answers()
    with client.responses.create(model="helper", input="hi", stream=True, background=True) as stream:
        events = iter(stream)
        seen = read_until(events, "response.in_progress")  # the stream is open: the answer's tokens come live
        model.release_answers()
        seen += list(events)
    check_events(seen)
    assert deltas(seen) == "Broken \ufffd text and more words"
    assert seen[-1].type == "response.completed"
    assert seen[-1].response.output_text == "Broken \ufffd text and more words"
