"""Streaming partial output: while a model answer streams in, polls show the text so far as `partial_output`;
the finished answer then arrives once, as an ordinary update."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from e2e_harness import PROGRESS_TIMEOUT_S, InProcessApp
from e2e_settings import watches_the_app_in_process

from scripted_model import Script, ScriptedModelServer

ANSWER = " ".join(f"word{i}" for i in range(60))  # streamed in many small chunks


@pytest.fixture
def streaming_app(app_with: Callable[..., AbstractContextManager[InProcessApp]]) -> Iterator[InProcessApp]:
    with app_with(PARTIAL_OUTPUT_INTERVAL_SECONDS="0") as app:
        yield app


@pytest.fixture
def slow_model(model_server: ScriptedModelServer) -> Iterator[ScriptedModelServer]:
    model_server.reset()
    model_server.latency_ms = 0
    model_server.chunk_delay_ms = 20  # a paced stream: the run is mid-answer for a while
    yield model_server
    model_server.chunk_delay_ms = 0


def test_polls_show_the_answer_as_it_streams_then_deliver_it_once(
    streaming_app: InProcessApp, slow_model: ScriptedModelServer
) -> None:
    slow_model.set_script(Script.of(ANSWER))
    started = streaming_app.start(input="tell me a long story")

    partials: list[str] = []
    deadline = time.monotonic() + PROGRESS_TIMEOUT_S
    token = started["continuation_token"]
    updates = list(started["updates"])
    while True:
        view = streaming_app.poll(started["run_id"], token=token, wait_seconds=0.2).json()
        updates += view["updates"]
        token = view["continuation_token"] or token
        if view["partial_output"]:
            partials.append(view["partial_output"])
        if view["status"] == "completed":
            break
        assert time.monotonic() < deadline, "the run did not finish"

    assert partials, "no poll saw the answer while it streamed"
    assert all(ANSWER.startswith(p) for p in partials)  # always a prefix of the final text
    assert any(len(p) < len(ANSWER) for p in partials)  # seen before it was complete
    assert view["partial_output"] is None and view["output"]["text"] == ANSWER
    answers = [u for u in updates if u["message"]["role"] == "assistant"]
    assert [a["message"]["contents"][0]["text"] for a in answers] == [ANSWER]  # delivered once, whole
    stored = streaming_app.session_messages(started["session_id"])
    assert [m["seq"] for m in stored] == [u["seq"] for u in updates]  # no draft left behind, nothing twice


def test_streaming_can_be_switched_off(
    model_server: ScriptedModelServer, app_with: Callable[..., AbstractContextManager[InProcessApp]]
) -> None:
    model_server.reset()
    model_server.set_script(Script.of("plain answer"))
    with app_with(STREAM_PARTIAL_OUTPUT="false") as app:
        started = app.start(input="hi")
        app.settle()
        assert app.view(started["run_id"])["output"]["text"] == "plain answer"
    assert model_server.log.last is not None and model_server.log.last.stream is False


@watches_the_app_in_process
def test_the_draft_interval_grows_to_the_configured_maximum(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], slow_model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`PARTIAL_OUTPUT_MAX_INTERVAL_SECONDS` reaches the model activity's draft writer: with a maximum far above the
    first interval the writes of a streamed answer thin out 1.5x a write (a handful over its ~1-2 s, however slow the
    machine: the count grows with the log of the time), with the maximum at the first interval they stay one per
    interval (one every 2-3 chunks at least: a slower machine only spaces the chunks further)."""
    answer = " ".join(f"word{i}" for i in range(240))  # ~100 chunks, 20 ms apart
    def writes(maximum: str) -> int:
        with app_with(PARTIAL_OUTPUT_INTERVAL_SECONDS="0.04", PARTIAL_OUTPUT_MAX_INTERVAL_SECONDS=maximum) as app:
            writer = app.app_module("agent_runs.drafts").DraftWriter
            write = writer._write
            written = 0

            async def counted(self: Any) -> None:
                nonlocal written
                written += 1
                await write(self)

            monkeypatch.setattr(writer, "_write", counted)
            slow_model.set_script(Script.of(answer))
            started = app.start(input="tell me a long story", wait_seconds=30)
            monkeypatch.undo()
            assert app.view(started["run_id"])["output"]["text"] == answer
            return written

    counts = {maximum: writes(maximum) for maximum in ("60", "0.04")}
    assert 2 <= counts["60"] <= 14 and counts["0.04"] >= 30, counts
