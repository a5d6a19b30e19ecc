"""What one stored message cannot hold (`agent_runtime.content_sizes`): a model's answer or a tool's result past a
megabyte, end to end through devhost, the real `openai` client and the store (2 MB an item, Cosmos's limit, on both).

Before, the step that made it failed when the store refused the message, and Durable retried it: the model was asked
again on each of its retries (each answer billed) and the run failed `model_call_failed` after them; the tool ran
again on each retry and the run failed `tool_call_failed`, the store's error text in the tool's result. Now an
oversized answer fails the call at once (`model_answer_too_large`, the model asked once, nothing of it stored; a stream
is given up at the limit and what it streamed is kept from the next run's model), and a tool's result is cut to the
limit with a note the model reads.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest
from e2e_harness import InProcessApp
from e2e_settings import watches_the_app_in_process

from agent_runtime.content_sizes import MAX_CONTENT_BYTES
from scripted_model import Reply, Script, ScriptedModelServer

TOO_LARGE = "model_answer_too_large"


def assert_failed_at_once(app: InProcessApp, model: ScriptedModelServer, run_id: str, session_id: str) -> None:
    view = app.view(run_id)
    assert view["status"] == "failed" and view["error"]["code"] == TOO_LARGE, view
    assert f"at most {MAX_CONTENT_BYTES:,} bytes" in view["error"]["message"]
    assert len(model.log.requests) == 1  # no retry asked the model again
    assert [m["role"] for m in app.session_messages(session_id)] == ["user"]  # nothing of the answer stored


def test_a_tool_call_with_arguments_past_the_limit_fails_the_call_at_once(
    model_server: ScriptedModelServer, app_with: Callable[..., AbstractContextManager[InProcessApp]]
) -> None:
    """Not streamed: the whole answer is read, then refused before anything is stored, with the usage billed."""
    model_server.reset()
    model_server.set_script(Script.of(Reply.call("lookup", {"key": "k" * 3_000_000}), "never asked"))
    with app_with(STREAM_PARTIAL_OUTPUT="false") as app:
        started = app.start(input="look it up")
        app.settle()
        assert_failed_at_once(app, model_server, started["run_id"], started["session_id"])
        assert "3,000," in app.view(started["run_id"])["error"]["message"]  # its size, in bytes
        assert app.view(started["run_id"])["usage"]["total_tokens"] > 0  # billed: counted on the run
        model_server.set_script(Script.of("fine"))
        after = app.start(input="again", session_id=started["session_id"])
        app.settle()
        assert app.view(after["run_id"])["status"] == "completed"
        assert model_server.log.last is not None and model_server.log.last.roles == ["system", "user", "user"]


def test_a_streamed_answer_is_given_up_at_the_limit(app: InProcessApp, model: ScriptedModelServer) -> None:
    """20 MB of text: the stream is closed once past a megabyte, not read to its end (a runaway endpoint would not
    end it), and the call fails as above."""
    model.set_script(Script.of("x" * 20_000_000))
    started = app.start(input="write a lot")
    app.settle()
    view = app.view(started["run_id"])
    assert view["status"] == "failed" and view["error"]["code"] == TOO_LARGE, view
    assert "characters so far" in view["error"]["message"]
    assert len(model.log.requests) == 1
    # What streamed before (a draft, when one was written by then) is emptied: the next run's model does not read
    # half an answer as its own.
    stored = app.session_messages(started["session_id"])
    assert [m["role"] for m in stored] in (["user"], ["user", "assistant"]) and all(
        m["contents"] == [] for m in stored if m["role"] == "assistant"
    ), stored
    model.set_script(Script.of("short"))
    after = app.start(input="shorter please", session_id=started["session_id"])
    app.settle()
    assert app.view(after["run_id"])["output"]["text"] == "short"
    assert model.log.last is not None and model.log.last.roles == ["system", "user", "user"]


@watches_the_app_in_process  # the tool's size and a count of its runs are set in this process
def test_a_tool_result_past_the_limit_is_cut_for_the_model_and_the_tool_runs_once(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = app.app_module("fixture_agents.tools")
    monkeypatch.setattr(tools, "BIG_RESULT_BYTES", 3_000_000)
    runs: list[int] = []
    big_result = tools.big_result.func

    def counted(index: int) -> dict:
        runs.append(index)
        return big_result(index)

    monkeypatch.setattr(tools.big_result, "func", counted)
    model.set_script(Script.of(Reply.call("big_result", {"index": 7}), "Read the first part."))
    started = app.start(input="read it")
    app.settle()
    view = app.view(started["run_id"])
    assert view["status"] == "completed" and view["output"]["text"] == "Read the first part.", view
    assert runs == [7]
    sent = model.log.requests[1].messages[-1]["content"]  # what the model read
    assert sent.startswith('{"index": 7, "text": "row 0007: lorem ipsum')  # the result's JSON text, cut
    assert sent.endswith(f"more characters omitted: a tool result is kept to {MAX_CONTENT_BYTES} bytes]")
    assert MAX_CONTENT_BYTES - 1000 < len(sent.encode()) < MAX_CONTENT_BYTES + 1000
