"""The stream cursor and what a client is sent from it (`http_api.streams`), event by event, without HTTP: every
interleaving of updates, live deltas and statuses that the watcher can produce, resumed from every event's id,
gives the same updates and the same answer text as one uninterrupted client, nothing twice."""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from http_api.streams.connection import Position
from http_api.streams.cursor import ANY_DONE, Cursor, done_fingerprint, fingerprint
from http_api.streams.feeds import Draft


@dataclass
class FakeWatcher:
    """The snapshot a `RunWatcher` exposes to connections."""

    updates: list[dict[str, Any]] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    status_fp: str = "-"
    draft: Draft | None = None
    confirmed_draft_seq: int | None = None
    done: dict[str, Any] | None = None

    def updates_after(self, seq: int):
        return (u for u in self.updates if u["seq"] > seq)

    @property
    def last_seq(self) -> int:
        return self.updates[-1]["seq"] if self.updates else -1

    def set_status(self, status: dict[str, Any]) -> None:
        self.status, self.status_fp = status, fingerprint(status)

    @property
    def done_fp(self) -> str:
        return "-" if self.done is None else done_fingerprint(self.done)


def parse(chunk: bytes) -> tuple[str, str, Any]:
    lines = chunk.decode().strip().split("\n")
    fields = dict(line.split(": ", 1) for line in lines)
    return fields["event"], fields["id"], json.loads(fields["data"])


ANSWER = "The weather in Paris is windy."


def timeline() -> list[callable]:  # type: ignore[valid-type]
    """The watcher's states in order: input, tool call, a live draft of answer 18 before the tool result 17 is
    visible (not shown yet), the result with the status naming model call 18, more draft, the finished answer,
    completion."""

    def step(fn):
        return fn

    return [
        step(lambda w: (w.updates.append({"seq": 1, "message": "input"}), w.set_status({"status": "in_progress"}))),
        step(lambda w: w.updates.append({"seq": 2, "message": "call"})),
        step(lambda w: setattr(w, "draft", Draft(18, "m18", ANSWER[:5]))),
        step(lambda w: (w.updates.append({"seq": 17, "message": "result"}), setattr(w, "confirmed_draft_seq", 18))),
        step(lambda w: setattr(w, "draft", Draft(18, "m18", ANSWER[:12]))),
        step(lambda w: setattr(w, "draft", Draft(18, "m18", ANSWER[:20]))),
        step(lambda w: (w.updates.append({"seq": 18, "message": ANSWER}), setattr(w, "draft", None))),
        step(lambda w: (w.set_status({"status": "completed"}), setattr(w, "done", {"status": "completed"}))),
    ]


def run_client(watcher: FakeWatcher, position: Position, steps: list, start: int, stop: int) -> list:
    received = []
    for index in range(start, stop):
        steps[index](watcher)
        received += [parse(c) for c in position.pending(watcher)]
    return received


def uninterrupted() -> list[tuple[str, str, Any]]:
    watcher, steps = FakeWatcher(), timeline()
    return run_client(watcher, Position(Cursor()), steps, 0, len(steps))


def test_an_uninterrupted_client_gets_each_thing_once_in_order() -> None:
    events = uninterrupted()
    assert [e for e, _, _ in events] == ["update", "status", "update", "update", "delta", "delta", "delta", "update",
                                         "status", "done"]
    assert [d["seq"] for e, _, d in events if e == "update"] == [1, 2, 17, 18]  # the result before the answer text
    assert "".join(d["text"] for e, _, d in events if e == "delta") == ANSWER[:20]


@pytest.mark.parametrize("cut", range(1, 10))
def test_resuming_from_any_event_id_gives_the_uninterrupted_stream(cut: int) -> None:
    reference = uninterrupted()
    watcher, steps = FakeWatcher(), timeline()
    first = Position(Cursor())
    received: list[tuple[str, str, Any]] = []
    for index, step in enumerate(steps):  # noqa: B007 - used after the loop; the first client leaves after `cut` events, mid-batch if need be
        step(watcher)
        for chunk in first.pending(watcher):
            if len(received) == cut:
                break
            received.append(parse(chunk))
        if len(received) == cut:
            break
    resumed = Position(Cursor.parse(received[-1][1]))
    received += [parse(c) for c in resumed.pending(watcher)]
    received += run_client(watcher, resumed, steps, index + 1, len(steps))
    kinds = ("update", "status", "done")
    assert [(e, d) for e, _, d in received if e in kinds] == [(e, d) for e, _, d in reference if e in kinds]
    text = "".join(d["text"] for e, _, d in received if e == "delta")
    assert ANSWER.startswith(text) and len(text) <= 20  # no character twice


def test_a_retried_answer_replaces_the_text() -> None:
    watcher = FakeWatcher(draft=Draft(5, "m", "Hello wor"), confirmed_draft_seq=5)
    position = Position(Cursor())
    assert [parse(c)[2] for c in position.pending(watcher)] == [{"message_id": "m", "text": "Hello wor"}]
    watcher.draft = Draft(5, "m", "Hi")
    assert [parse(c)[2] for c in position.pending(watcher)] == [{"message_id": "m", "text": "Hi", "replace": True}]


def client_text(events: list[tuple[str, str, Any]]) -> str:
    """The answer as a client shows it: deltas appended, a `replace` starting over."""
    text = ""
    for kind, _, data in events:
        if kind == "delta":
            text = data["text"] if data.get("replace") else text + data["text"]
    return text


def test_a_retried_answer_longer_than_the_text_sent_replaces_it() -> None:
    # The retry's text grew past what the client has before the client looked again (a slow consumer, or a stored
    # draft read once per interval): its length alone does not tell that it started over.
    watcher = FakeWatcher(draft=Draft(5, "m", "Hello"), confirmed_draft_seq=5)
    position = Position(Cursor())
    received = [parse(c) for c in position.pending(watcher)]
    watcher.draft = Draft(5, "m", "Greetings, friend")
    received += [parse(c) for c in position.pending(watcher)]
    assert client_text(received) == "Greetings, friend"


def test_a_client_resuming_across_a_retried_answer_gets_it_replaced() -> None:
    watcher = FakeWatcher(draft=Draft(5, "m", "Hello"), confirmed_draft_seq=5)
    received = [parse(c) for c in Position(Cursor()).pending(watcher)]
    watcher.draft = Draft(5, "m", "Greetings, friend")  # retried while the client was away
    received += [parse(c) for c in Position(Cursor.parse(received[-1][1])).pending(watcher)]
    assert client_text(received) == "Greetings, friend"
    watcher.draft = Draft(5, "m", "Greetings, friend!")  # and the same answer goes on: an append
    resumed = Position(Cursor.parse(received[-1][1]))
    assert [parse(c)[2] for c in resumed.pending(watcher)] == [{"message_id": "m", "text": "!"}]


def test_a_cursor_without_the_text_fingerprint_still_resumes_by_length() -> None:
    watcher = FakeWatcher(draft=Draft(5, "m", "Hello world"), confirmed_draft_seq=5)
    position = Position(Cursor.parse("3.5.5.-"))  # an id sent before the fingerprint was part of it
    assert [parse(c)[2] for c in position.pending(watcher)] == [{"message_id": "m", "text": " world"}]


@pytest.mark.parametrize("text", ["", "1.2", "1.5.5.-.xyz", "1.5.5.-.0a1b2c3d4", "1.5.5.-.-",
                                  "a.0.0.-", "1.0.0.xyz", "01.0.0.-", "1.0.0.-\nx", "-2.0.0.-"])
def test_bad_cursors_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        Cursor.parse(text)


def test_cursors_round_trip() -> None:
    for cursor in (Cursor(), Cursor(1000000018, 0, 0, "0a1b2c3d"), Cursor(3, 18, 120, "-"),
                   Cursor(3, 18, 120, "-", "0a1b2c3d"), Cursor(3, 0, 0, "0a1b2c3d", done="4e5f6a7b"),
                   Cursor(3, 0, 0, "0a1b2c3d", done=ANY_DONE)):  # `done`'s id from before its fingerprint
        assert Cursor.parse(cursor.encode()) == cursor


def test_a_lone_surrogate_in_the_answer_is_sent_as_a_replacement_character() -> None:
    # A model may stream a lone UTF-16 surrogate (a JSON `\ud800` escape with no pair): no UTF-8 text, so the event
    # carries U+FFFD as JSON encoders of UTF-8 do, and the stream goes on (resuming too: the cursor counts it once).
    watcher = FakeWatcher(draft=Draft(5, "m", "Hi \ud800"), confirmed_draft_seq=5)
    received = [parse(c) for c in Position(Cursor()).pending(watcher)]
    watcher.draft = Draft(5, "m", "Hi \ud800 there \udc00\ud83d\ude00")
    received += [parse(c) for c in Position(Cursor.parse(received[-1][1])).pending(watcher)]
    assert client_text(received) == "Hi \ufffd there \ufffd\U0001f600"
    watcher.set_status({"status": "completed", "note": "\udfff"})
    watcher.draft, watcher.done = None, {"output": {"text": "Hi \ud800"}}
    assert [parse(c)[2] for c in Position(Cursor.parse(received[-1][1])).pending(watcher)] == [
        {"status": "completed", "note": "\ufffd"}, {"output": {"text": "Hi \ufffd"}}]


def test_a_client_back_after_done_has_had_everything_unless_the_run_went_on() -> None:
    watcher, steps = FakeWatcher(), timeline()
    events = run_client(watcher, Position(Cursor()), steps, 0, len(steps))
    assert events[-1][0] == "done" and events[-2][0] == "status"
    assert Position(Cursor.parse(events[-1][1])).delivered(watcher)  # type: ignore[arg-type]
    before_done = Position(Cursor.parse(events[-2][1]))  # the final status's id: `done` is still to come
    assert not before_done.delivered(watcher)  # type: ignore[arg-type]
    assert [e for e, _, _ in map(parse, before_done.pending(watcher))] == ["done"]  # type: ignore[arg-type]
    # The run reopened (a rewind) and wrote more: `done`'s id resumes it like any other.
    watcher.updates.append({"seq": 19, "message": "more"})
    watcher.done = None
    resumed = Position(Cursor.parse(events[-1][1]))
    assert not resumed.delivered(watcher)  # type: ignore[arg-type]
    assert [d for _, _, d in map(parse, resumed.pending(watcher))] == [{"seq": 19, "message": "more"}]


def test_a_client_back_after_done_hears_of_another_end_with_nothing_new_before_it() -> None:
    """A rewind that failed again may write no update and leave the status as it was: only `done` tells."""
    watcher, steps = FakeWatcher(), timeline()
    done_id = run_client(watcher, Position(Cursor()), steps, 0, len(steps))[-1][1]
    assert Position(Cursor.parse(done_id)).delivered(watcher)  # type: ignore[arg-type]
    watcher.done = {**watcher.done, "rewinds": [{"rewind_id": "r1"}]}
    back = Position(Cursor.parse(done_id))
    assert not back.delivered(watcher)  # type: ignore[arg-type]
    assert [(e, d) for e, _, d in map(parse, back.pending(watcher))] == [("done", watcher.done)]  # type: ignore[arg-type]


def test_a_plain_done_id_is_never_had_everything_before_the_run_ends() -> None:
    """`.done` without its fingerprint (an id from before it, or forged onto any cursor) says a `done` was had, not
    which: 204 only once the run has ended and nothing came after the cursor, else the stream goes on from it."""
    watcher, steps = FakeWatcher(), timeline()
    events = run_client(watcher, Position(Cursor()), steps, 0, len(steps) - 1)  # all but the end
    for _, event_id, _ in events:
        back = Position(Cursor.parse(f"{event_id}.done"))
        assert not back.delivered(watcher), event_id  # type: ignore[arg-type]
    for early in ("-1.0.0.-.done", "0.0.0.-.done"):  # from before anything: the whole stream, though it ended
        assert not Position(Cursor.parse(early)).delivered(watcher)  # type: ignore[arg-type]
    steps[-1](watcher)
    assert Position(Cursor.parse(f"{events[-1][1]}.done")).delivered(watcher)  # type: ignore[arg-type]
    assert not Position(Cursor.parse("-1.0.0.-.done")).delivered(watcher)  # type: ignore[arg-type]
    cursor = Cursor.parse(events[1][1])
    resumed = [parse(c) for c in Position(replace(cursor, done=ANY_DONE)).pending(watcher)]  # type: ignore[arg-type]
    after = [u for u in watcher.updates if u["seq"] > cursor.seq]
    assert [d for e, _, d in resumed if e == "update"] == after and resumed[-1][0] == "done", resumed


class CountingHashlib:
    """`hashlib` for `http_api.streams.cursor`, counting the bytes its fingerprints hash."""

    def __init__(self) -> None:
        self.hashed = 0

    def blake2s(self, data: bytes = b"", **options: Any) -> Any:
        counter = self

        class Counted:
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def update(self, more: bytes) -> None:
                counter.hashed += len(more)
                self.inner.update(more)

            def copy(self) -> Counted:
                return Counted(self.inner.copy())

            def hexdigest(self) -> str:
                return self.inner.hexdigest()

        self.hashed += len(data)
        return Counted(hashlib.blake2s(data, **options))


def test_a_long_answer_is_fingerprinted_once_for_all_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every token of a live answer goes to every client with the cursor's text fingerprint: the run's watcher hashes
    each character once (not the whole text twice per token per client, quadratic in the answer), and the clients
    receive exactly what they received when each fingerprinted the text itself."""
    from agent_runs.live_drafts import LiveDraft
    from http_api.streams import cursor as cursor_module
    from http_api.streams.settings import StreamSettings
    from http_api.streams.watchers import RunWatcher

    tokens = [f"word{i} " for i in range(300)]
    answer = "".join(tokens)
    counting = CountingHashlib()

    def stream(make_draft: Any) -> list[list[tuple[str, str, Any]]]:
        async def main() -> list[list[tuple[str, str, Any]]]:
            watcher = RunWatcher(("run", "r"), None, StreamSettings(), lambda w: None)  # type: ignore[arg-type]
            watcher.confirmed_draft_seq = 5
            clients = [Position(Cursor()) for _ in range(3)]
            received: list[list[tuple[str, str, Any]]] = [[] for _ in clients]
            for count in range(1, len(tokens) + 1):  # the tokens as the model call publishes them
                watcher.draft = make_draft(watcher, "".join(tokens[:count]))
                for position, events in zip(clients, received, strict=True):
                    events += [parse(c) for c in position.pending(watcher)]  # type: ignore[arg-type]
            return received

        return asyncio.run(main())

    reference = stream(lambda watcher, text: Draft(5, "m", text))  # each client fingerprints the text itself
    monkeypatch.setattr(cursor_module, "hashlib", counting)
    shared = stream(lambda watcher, text: watcher._on_live_draft(LiveDraft("r", 5, "m", text)) or watcher.draft)
    assert shared == reference and client_text(shared[0]) == answer
    assert counting.hashed <= 2 * len(answer)


def test_the_done_view_is_fingerprinted_once_for_all_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    """`done` holds the whole answer and every client's `done` id carries its fingerprint: the watcher computes it
    once when the run ends, not each client (and each client back with `done`'s id) again."""
    from http_api.streams import cursor as cursor_module
    from http_api.streams.feeds import Refresh
    from http_api.streams.settings import StreamSettings
    from http_api.streams.watchers import RunWatcher

    answer = "word " * 20_000
    done = {"status": "completed", "output": {"text": answer}, "links": {"self": "http://a/api/runs/r"}}

    class EndedFeed:
        async def refresh(self, state: Any, after: int) -> Refresh:
            return Refresh(updates=[{"seq": 0, "message": "hi"}], status={"status": "completed"}, done=done)

    async def main() -> tuple[list[tuple[str, str, Any]], list[bool]]:
        watcher = RunWatcher(("run", "r"), EndedFeed(), StreamSettings(), lambda w: None)  # type: ignore[arg-type]
        await watcher._refresh(None)
        clients = [[parse(c) for c in Position(Cursor()).pending(watcher)] for _ in range(3)]
        back = [Position(Cursor.parse(events[-1][1])).delivered(watcher) for events in clients]
        return clients[0], back

    expected = done_fingerprint(done)
    counting = CountingHashlib()
    monkeypatch.setattr(cursor_module, "hashlib", counting)
    events, back = asyncio.run(main())
    assert events[-1][0] == "done" and events[-1][2] == done and back == [True, True, True]
    assert Cursor.parse(events[-1][1]).done == expected
    assert counting.hashed < 2 * len(answer)  # once: not per client, nor per client back
