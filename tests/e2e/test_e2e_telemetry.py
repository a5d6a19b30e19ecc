"""One OpenTelemetry trace per run, GenAI semantic-convention spans, emitted from activities only: a 5-step run
(model, tool, model, tool, model) gives exactly one `invoke_agent`, three `chat` and two `execute_tool` spans in one
trace, parented under the run span, with or without an approval in between; replays add nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from e2e_harness import InProcessApp
from e2e_settings import app_settings, running_app
from telemetry_sink import TelemetrySink, names, telemetry_sink

from scripted_model import Reply, Script, ScriptedModelServer

FIVE_STEPS = Script.of(Reply.call("lookup", {"key": "a"}), Reply.call("lookup", {"key": "b"}), "Both found.")
CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"


@pytest.fixture
def sink() -> Iterator[TelemetrySink]:
    sink = telemetry_sink()
    sink.clear()
    yield sink
    sink.clear()


@pytest.fixture
def app(model_server: ScriptedModelServer, sink: TelemetrySink) -> Iterator[InProcessApp]:
    with running_app(app_settings(model_server.base_url, SESSION_STORE_PATH=":memory:"), "sqlite") as started:
        yield started


def run_to_end(app: InProcessApp, **headers: str) -> dict:
    response = app.http.post("/api/agents/helper/runs", json={"input": "Look up a and b"}, headers=headers)
    assert response.status_code == 202, response.text
    app.settle()
    return app.view(response.json()["run_id"])


def test_a_five_step_run_is_one_trace_of_six_spans(app: InProcessApp, model: ScriptedModelServer, sink) -> None:
    model.set_script(FIVE_STEPS)
    view = run_to_end(app)
    assert view["status"] == "completed"

    spans = sink.spans()
    assert names(spans) == [
        "chat scripted-model", "chat scripted-model", "chat scripted-model",
        "execute_tool lookup", "execute_tool lookup", "invoke_agent helper",
    ]
    assert len({span.context.trace_id for span in spans}) == 1
    run_span = next(s for s in spans if s.name == "invoke_agent helper")
    assert run_span.parent is None  # no traceparent came with the request: the run is the root
    for step in (s for s in spans if s is not run_span):
        assert step.parent is not None and step.parent.span_id == run_span.context.span_id
        assert run_span.start_time <= step.start_time and step.end_time <= run_span.end_time
    attributes = run_span.attributes
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.agent.name"] == "helper"
    assert attributes["gen_ai.conversation.id"] == view["session_id"]
    assert attributes["agent_run.id"] == view["run_id"]
    assert attributes["agent_run.status"] == "completed"
    assert attributes["gen_ai.usage.input_tokens"] == view["usage"]["input_tokens"] > 0

    chats = sorted((s for s in spans if s.name.startswith("chat")), key=lambda s: s.start_time)
    for chat in chats:
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "openai"
        assert chat.attributes["gen_ai.request.model"] == "scripted-model"
        assert chat.attributes["gen_ai.response.model"]
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
        assert "gen_ai.input.messages" not in chat.attributes  # content capture is off by default
    assert [c.attributes["gen_ai.response.finish_reasons"] for c in chats] == [
        ("tool_calls",), ("tool_calls",), ("stop",)
    ]
    assert sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats) == view["usage"]["input_tokens"]
    tools = sorted((s for s in spans if s.name.startswith("execute_tool")), key=lambda s: s.start_time)
    calls = [u["message"]["contents"][0]["call_id"] for u in view["updates"] if u["message"]["role"] == "tool"]
    assert [t.attributes["gen_ai.tool.call.id"] for t in tools] == calls
    assert all(t.attributes["gen_ai.tool.name"] == "lookup" for t in tools)
    assert all(t.attributes["gen_ai.operation.name"] == "execute_tool" for t in tools)


def test_the_run_continues_the_callers_trace(app: InProcessApp, model: ScriptedModelServer, sink) -> None:
    model.set_script(FIVE_STEPS)
    run_to_end(app, traceparent=f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01")

    spans = sink.spans()
    assert len(spans) == 6
    assert {f"{s.context.trace_id:032x}" for s in spans} == {CLIENT_TRACE}
    run_span = next(s for s in spans if s.name == "invoke_agent helper")
    assert f"{run_span.parent.span_id:016x}" == CLIENT_SPAN

