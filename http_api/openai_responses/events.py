"""The Responses streaming events of one response, from successive looks at it (pure: no I/O, no clock).

The SSE transport (`stream`) reads the run, builds the turn's `ResponseObject` (`snapshots.read_snapshot` +
`mapping.build_response`, as `GET /responses/{id}` does) and the draft of the answer streaming in (`Draft`: the
answer being written at `RunProgress.model_call_seq`, live or stored, with `mapping.message_item_id(its
message_id)`), and feeds both to a `ResponseEventStream`; it sends back what `feed` returns, in order, each with its
increasing `sequence_number`.

Resumable by construction: the events depend only on what the response contains, never on when it was looked at.
Text is cut into deltas at boundaries that depend on the text alone (a whitespace-to-word change, or every
`MAX_DELTA_CHARS`), a draft only releases the deltas it has complete, and every item goes through all of its events
in a fixed order whether it was seen half-done or done. So a new stream fed the current state reproduces exactly the
events the first stream sent: `GET ...?stream=true&starting_after=N` is `ResponseEventStream(starting_after=N)` fed the
current look. (A draft that a retried model call replaced by a different answer cannot be taken back; the
`output_text.done` event carries the final text.)

Event types: response.created, response.in_progress, response.output_item.added/.done,
response.content_part.added/.done, response.output_text.delta/.done, response.mcp_call_arguments.delta/.done,
response.mcp_call.in_progress/.completed/.failed, and one of response.completed / response.failed (also for a
cancelled response: its `response.status` says so; the Responses API has no cancelled event) /
response.incomplete.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from http_api.openai_responses.models import (
    FINAL_RESPONSE_STATUSES,
    McpCall,
    MessageOutput,
    OutputItem,
    OutputText,
    ResponseObject,
)

MAX_DELTA_CHARS = 64
_TERMINAL_EVENT = {"completed": "response.completed", "incomplete": "response.incomplete"}


def _opening(response: ResponseObject, status: str) -> dict[str, Any]:
    """The response as the opening events show it: no output yet (items arrive by their own events)."""
    return response.model_copy(update={"status": status, "output": [], "usage": None, "error": None}).model_dump(
        mode="json"
    )


@dataclass(frozen=True)
class Draft:
    """The text so far of the answer being written (its first message), with that message's output item id."""

    item_id: str
    text: str


def delta_boundaries(text: str, *, final: bool) -> list[int]:
    """Where deltas end: after a run of whitespace that a word follows, or `MAX_DELTA_CHARS` after the last cut.
    Decided by the characters up to the cut only, so a prefix of a text gets the same cuts as the text; `final`
    adds the end of the text."""
    cuts: list[int] = []
    last = 0
    for position in range(1, len(text)):
        if (text[position - 1].isspace() and not text[position].isspace()) or position - last >= MAX_DELTA_CHARS:
            cuts.append(position)
            last = position
    if final and text and (not cuts or cuts[-1] != len(text)):
        cuts.append(len(text))
    return cuts


@dataclass
class _ItemState:
    index: int
    added: bool = False
    text_sent: int = 0  # characters of the message's text sent as deltas
    part_added: bool = False
    arguments_done: bool = False
    done: bool = False


@dataclass
class ResponseEventStream:
    """Feed it the response each time you look; it returns the events that look adds (see the module docstring)."""

    starting_after: int | None = None
    _next: int = 0
    _created: bool = False
    _in_progress: bool = False
    _finished: bool = False
    _items: dict[str, _ItemState] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self._finished

    def feed(self, response: ResponseObject, draft: Draft | None = None) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        if self._finished:
            return events
        if not self._created:
            self._created = True
            status = "queued" if response.status == "queued" else "in_progress"
            self._emit(events, "response.created", response=_opening(response, status))
        if response.status != "queued" and not self._in_progress:
            self._in_progress = True
            self._emit(events, "response.in_progress", response=_opening(response, "in_progress"))
        final = response.status in FINAL_RESPONSE_STATUSES
        for index, item in enumerate(response.output):
            self._item_events(events, index, item)
        if draft is not None and not final and draft.item_id not in {item.id for item in response.output}:
            self._draft_events(events, len(response.output), draft)
        if final:
            self._finished = True
            kind = _TERMINAL_EVENT.get(response.status, "response.failed")
            self._emit(events, kind, response=response.model_dump(mode="json"))
        if self.starting_after is not None:
            events = [e for e in events if e["sequence_number"] > self.starting_after]
        return events

    # ------------------------------------------------------------------------------------------------ items

    def _state(self, events: list[dict[str, Any]], index: int, item_id: str, added: dict[str, Any]) -> _ItemState:
        state = self._items.get(item_id)
        if state is None:
            state = self._items[item_id] = _ItemState(index=index)
        if not state.added:
            state.added = True
            self._emit(events, "response.output_item.added", output_index=state.index, item=added)
        return state

    def _item_events(self, events: list[dict[str, Any]], index: int, item: OutputItem) -> None:
        if isinstance(item, MessageOutput):
            self._message_events(events, index, item)
        elif isinstance(item, McpCall):
            self._call_events(events, index, item)
        else:  # an approval request: complete as it appears
            state = self._state(events, index, item.id, item.model_dump(mode="json"))
            if not state.done:
                state.done = True
                self._emit(
                    events, "response.output_item.done", output_index=state.index, item=item.model_dump(mode="json")
                )

    def _message_shell(self, item_id: str) -> dict[str, Any]:
        return MessageOutput(id=item_id, status="in_progress", content=[]).model_dump(mode="json")

    def _text_events(
        self, events: list[dict[str, Any]], state: _ItemState, item_id: str, text: str, *, final: bool
    ) -> None:
        if not state.part_added:
            state.part_added = True
            self._emit(
                events,
                "response.content_part.added",
                item_id=item_id,
                output_index=state.index,
                content_index=0,
                part=OutputText(text="").model_dump(mode="json"),
            )
        for cut in delta_boundaries(text, final=final):
            if cut > state.text_sent:
                self._emit(
                    events,
                    "response.output_text.delta",
                    item_id=item_id,
                    output_index=state.index,
                    content_index=0,
                    delta=text[state.text_sent : cut],
                    logprobs=[],
                )
                state.text_sent = cut

    def _draft_events(self, events: list[dict[str, Any]], index: int, draft: Draft) -> None:
        state = self._state(events, index, draft.item_id, self._message_shell(draft.item_id))
        self._text_events(events, state, draft.item_id, draft.text, final=False)

    def _message_events(self, events: list[dict[str, Any]], index: int, item: MessageOutput) -> None:
        state = self._state(events, index, item.id, self._message_shell(item.id))
        if state.done:
            return
        text = "".join(part.text for part in item.content)
        self._text_events(events, state, item.id, text, final=True)
        part = OutputText(text=text).model_dump(mode="json")
        self._emit(
            events,
            "response.output_text.done",
            item_id=item.id,
            output_index=state.index,
            content_index=0,
            text=text,
            logprobs=[],
        )
        self._emit(
            events, "response.content_part.done", item_id=item.id, output_index=state.index, content_index=0, part=part
        )
        state.done = True
        self._emit(events, "response.output_item.done", output_index=state.index, item=item.model_dump(mode="json"))

    def _call_events(self, events: list[dict[str, Any]], index: int, item: McpCall) -> None:
        shell = item.model_copy(update={"arguments": "", "output": None, "error": None, "status": "in_progress"})
        state = self._state(events, index, item.id, shell.model_dump(mode="json"))
        if not state.arguments_done:
            state.arguments_done = True
            if item.arguments:
                self._emit(
                    events,
                    "response.mcp_call_arguments.delta",
                    item_id=item.id,
                    output_index=state.index,
                    delta=item.arguments,
                )
            self._emit(
                events,
                "response.mcp_call_arguments.done",
                item_id=item.id,
                output_index=state.index,
                arguments=item.arguments,
            )
            self._emit(events, "response.mcp_call.in_progress", item_id=item.id, output_index=state.index)
        if state.done or item.status not in ("completed", "failed"):
            return
        state.done = True
        kind = "response.mcp_call.completed" if item.status == "completed" else "response.mcp_call.failed"
        self._emit(events, kind, item_id=item.id, output_index=state.index)
        self._emit(events, "response.output_item.done", output_index=state.index, item=item.model_dump(mode="json"))

    def _emit(self, events: list[dict[str, Any]], kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": self._next, **fields})
        self._next += 1
