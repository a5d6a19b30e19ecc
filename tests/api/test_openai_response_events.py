"""The Responses streaming events (`http_api.openai_responses.events`): checked against the official `openai`
package's own event types and the stream accumulator its `responses.stream()` uses, so a client reading the SSE
transport gets what it expects. Pure: no host needed."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from openai import omit
from openai._models import construct_type
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from http_api.openai_responses.events import MAX_DELTA_CHARS, Draft, ResponseEventStream, delta_boundaries
from http_api.openai_responses.mapping import run_error
from http_api.openai_responses.models import (
    McpApprovalRequest,
    McpCall,
    McpToolExecutionError,
    MessageOutput,
    OutputText,
    ResponseObject,
)

EVENTS = TypeAdapter(ResponseStreamEvent)
ANSWER = "The value of a is value-of-a, as the lookup said. " + "x" * 150 + " done."
MSG = "msg_run:model:1:0"
SNAPSHOT_EVENTS = ("response.created", "response.in_progress")


def response(status: str, *items: Any, error: dict[str, str] | None = None) -> ResponseObject:
    return ResponseObject(id="resp_1", created_at=1.0, status=status, model="helper", output=list(items), error=error)


def call(status: str = "calling", output: str | None = None, error: str | None = None) -> McpCall:
    return McpCall(
        id="mcp_c1",
        server_label="helper",
        name="lookup",
        arguments='{"key": "a"}',
        output=output,
        error=McpToolExecutionError.of(error) if error else None,
        status=status,
    )


def message(text: str = ANSWER) -> MessageOutput:
    return MessageOutput(id=MSG, content=[OutputText(text=text)])


def looks() -> list[tuple[ResponseObject, Draft | None]]:
    """A run as a poller sees it: queued, a tool call running then done, the answer streaming in, completed."""
    done_call = call("completed", output='{"value": "value-of-a"}')
    return [
        (response("queued"), None),
        (response("in_progress"), None),
        (response("in_progress", call()), None),
        (response("in_progress", done_call), None),
        (response("in_progress", done_call), Draft(MSG, ANSWER[:7])),
        (response("in_progress", done_call), Draft(MSG, ANSWER[:40])),
        (response("in_progress", done_call), Draft(MSG, ANSWER[:170])),
        (response("completed", done_call, message()), None),
    ]


def stream(feeds: list[tuple[ResponseObject, Draft | None]], starting_after: int | None = None) -> list[dict[str, Any]]:
    encoder = ResponseEventStream(starting_after=starting_after)
    return [event for look, draft in feeds for event in encoder.feed(look, draft)]


def same(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events without the response snapshot that `created`/`in_progress` carry (a snapshot of the moment)."""
    return [{k: v for k, v in e.items() if k != "response" or e["type"] not in SNAPSHOT_EVENTS} for e in events]


def accumulate(events: list[dict[str, Any]]) -> Any:
    """What the official client's stream helper makes of the events (it raises on events it cannot place)."""
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=[], text_format=omit)
    for event in events:
        EVENTS.validate_python(event)  # every required field, of the right type
        state.handle_event(construct_type(type_=ResponseStreamEvent, value=event))  # type: ignore[arg-type]
    return state


def test_events_are_what_the_official_client_expects() -> None:
    events = stream(looks())
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[2:7] == [
        "response.output_item.added",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert kinds[-1] == "response.completed" and kinds.count("response.output_item.done") == 2
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == ANSWER and len(deltas) > 3  # streamed in pieces, joined to the final text
    assert all(len(d) <= MAX_DELTA_CHARS for d in deltas)
    final = accumulate(events).handle_event  # the accumulator placed every event
    assert final


def test_the_same_events_however_often_the_poller_looked() -> None:
    """Resumability: the events depend on the content, not on when the transport looked."""
    every = stream(looks())
    for keep in itertools.combinations(range(len(looks()) - 1), 3):
        sparse = [looks()[i] for i in keep] + [looks()[-1]]
        assert same(stream(sparse)) == same(every)


@pytest.mark.parametrize("dropped_after", [0, 1, 5, 9, 14])
def test_resume_with_starting_after(dropped_after: int) -> None:
    """A dropped stream resumed from the current state: exactly the events after the last one received."""
    feeds = looks()
    first = stream(feeds[:5])
    received = [e for e in first if e["sequence_number"] <= dropped_after]
    assert received, "the drop happens after some events arrived"
    # A new stream, fed only the looks after the drop, from the last event the client has.
    resumed = stream(feeds[5:], starting_after=received[-1]["sequence_number"])
    assert same(received + resumed) == same(stream(feeds))


def test_a_resumed_stream_from_the_latest_look_alone() -> None:
    full = stream(looks())
    assert same(stream([looks()[-1]], starting_after=10)) == same([e for e in full if e["sequence_number"] > 10])


def test_approval_turn_and_failure() -> None:
    request = McpApprovalRequest(id="appr_1", server_label="helper", name="send_email", arguments="{}")
    events = stream([(response("in_progress"), None), (response("completed", request), None)])
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    accumulate(events)
    failed = stream(
        [(response("failed", call("failed", error="boom"), error=run_error("run_crashed", "x").model_dump()), None)]
    )
    assert [e["type"] for e in failed][-3:] == [
        "response.mcp_call.failed",
        "response.output_item.done",
        "response.failed",
    ]
    accumulate(failed)
    cancelled = stream([(response("cancelled"), None)])
    assert cancelled[-1]["type"] == "response.failed" and cancelled[-1]["response"]["status"] == "cancelled"
    incomplete = stream([(response("incomplete", message("cut")), None)])
    assert incomplete[-1]["type"] == "response.incomplete"


def test_nothing_after_the_end() -> None:
    encoder = ResponseEventStream()
    assert encoder.feed(response("completed", message("hi")))
    assert encoder.finished and encoder.feed(response("completed", message("hi"))) == []


def test_delta_boundaries_of_a_prefix_are_those_of_the_text() -> None:
    text = "one two  three\nfour " + "y" * 200 + " five"
    full = delta_boundaries(text, final=True)
    for end in range(len(text) + 1):
        assert delta_boundaries(text[:end], final=False) == [cut for cut in full if cut < end]
    assert full[-1] == len(text)
