"""What one Responses stream client is sent from the shared watcher's look (`openai_responses.stream.ResponsePosition`),
without HTTP: the SSE framing OpenAI uses, a draft shown only once the status names its model call (so its place
among the output items is final), and an end for a turn the run will never have."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from test_openai_responses_mapping import FIRST, RUN, approval_run

from http_api.openai_responses.ids import ResponseRef
from http_api.openai_responses.mapping import RunSnapshot
from http_api.openai_responses.stream import ResponsePosition
from http_api.streams.feeds import Draft

ANSWER_SEQ = FIRST + 20  # where approval_run stores the answer "Sent."


@dataclass
class FakeWatcher:
    """The look a `RunWatcher` gives its connections."""

    snapshot: RunSnapshot | None
    draft: Draft | None = None
    confirmed_draft_seq: int | None = None
    done: dict[str, Any] | None = None


def parse(chunks: list[bytes]) -> list[dict[str, Any]]:
    events = []
    for chunk in chunks:
        text = chunk.decode()
        assert text.endswith("\n\n") and text.count("\n") == 3  # `event:` and `data:`, no `id:`
        event_line, data_line = text.strip().split("\n")
        data = json.loads(data_line.removeprefix("data: "))
        assert event_line == f"event: {data['type']}"
        events.append(data)
    return events


def test_a_draft_waits_for_the_status_that_names_its_model_call() -> None:
    position = ResponsePosition(ResponseRef(RUN, 2), starting_after=None, background=None)
    watcher = FakeWatcher(approval_run(decided=True, answered=False))
    watcher.draft = Draft(ANSWER_SEQ, f"{RUN}:m:20", "Sent")
    opening = parse(list(position.pending(watcher)))  # type: ignore[arg-type]
    assert [e["type"] for e in opening] == ["response.created", "response.in_progress"]  # the draft is not placed
    watcher.confirmed_draft_seq = ANSWER_SEQ
    drafted = parse(list(position.pending(watcher)))  # type: ignore[arg-type]
    assert [e["type"] for e in drafted] == ["response.output_item.added", "response.content_part.added"]
    assert drafted[0]["item"]["id"] == f"msg_{RUN}:m:20" and drafted[0]["output_index"] == 0
    watcher.snapshot, watcher.draft, watcher.done = approval_run(decided=True, answered=True), None, {}
    rest = parse(list(position.pending(watcher)))  # type: ignore[arg-type]
    kinds = [e["type"] for e in rest]
    assert kinds[-1] == "response.completed" and position.finished
    assert "".join(e["delta"] for e in rest if e["type"] == "response.output_text.delta") == "Sent."
    assert [e["sequence_number"] for e in opening + drafted + rest] == list(range(len(opening + drafted + rest)))


def test_an_empty_draft_adds_no_item() -> None:
    """A model call that only calls tools writes no text: no message item may open for it."""
    position = ResponsePosition(ResponseRef(RUN, 2), starting_after=None, background=None)
    watcher = FakeWatcher(approval_run(decided=True, answered=False), Draft(ANSWER_SEQ, f"{RUN}:m:20", ""),
                          ANSWER_SEQ)
    assert [e["type"] for e in parse(list(position.pending(watcher)))] == [  # type: ignore[arg-type]
        "response.created", "response.in_progress"
    ]


def test_a_turn_the_finished_run_never_had_ends_the_stream() -> None:
    position = ResponsePosition(ResponseRef(RUN, 3), starting_after=None, background=None)
    watcher = FakeWatcher(approval_run(decided=True, answered=True), done={})
    assert list(position.pending(watcher)) == [] and position.finished  # type: ignore[arg-type]


def test_a_turn_the_look_does_not_have_yet_waits_for_the_next_look() -> None:
    """A shared watcher may read behind the route that found the turn: the stream waits, it does not end."""
    position = ResponsePosition(ResponseRef(RUN, 2), starting_after=None, background=None)
    behind = approval_run(decided=False, answered=False)
    behind = RunSnapshot(**{**vars(behind), "messages": behind.messages[:2]})  # before the approval request
    watcher = FakeWatcher(behind)
    assert list(position.pending(watcher)) == [] and not position.finished  # type: ignore[arg-type]
    watcher.snapshot = approval_run(decided=True, answered=True)
    events = parse(list(position.pending(watcher)))  # type: ignore[arg-type]
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"


def test_a_lone_surrogate_in_the_draft_is_sent_as_a_replacement_character() -> None:
    """A model may stream a lone UTF-16 surrogate: the delta carries U+FFFD (what UTF-8 JSON can say), the stream goes
    on."""
    position = ResponsePosition(ResponseRef(RUN, 2), starting_after=None, background=None)
    watcher = FakeWatcher(approval_run(decided=True, answered=False), Draft(ANSWER_SEQ, f"{RUN}:m:20", "Se\ud800 nt"),
                          ANSWER_SEQ)
    events = parse(list(position.pending(watcher)))  # type: ignore[arg-type]
    assert [e["delta"] for e in events if e["type"] == "response.output_text.delta"] == ["Se\ufffd "]
