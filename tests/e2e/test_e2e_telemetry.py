"""One OpenTelemetry trace per run, GenAI semantic-convention spans, emitted from activities only: a 5-step run
(model, tool, model, tool, model) gives exactly one `invoke_agent`, three `chat` and two `execute_tool` spans in one
trace, parented under the run span, with or without an approval in between; replays add nothing."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import datetime

import pytest
from e2e_harness import InProcessApp
from e2e_settings import app_settings, reads_the_in_process_sink, running_app

from scripted_model import Reply, Script, ScriptedModelServer
from telemetry.testing import TelemetrySink, names, telemetry_sink

FIVE_STEPS = Script.of(Reply.call("lookup", {"key": "a"}), Reply.call("lookup", {"key": "b"}), "Both found.")
pytestmark = reads_the_in_process_sink
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



def test_two_traceparent_headers_continue_neither_trace(app: InProcessApp, model: ScriptedModelServer, sink) -> None:
    """Sent twice, `traceparent` arrives comma-joined (as the Functions host passes a repeated header), which is no
    traceparent: the run starts a trace of its own rather than picking one of the callers' (W3C Trace Context)."""
    model.set_script(FIVE_STEPS)
    other = "0af7651916cd43dd8448eb211c80319c"
    response = app.http.post("/api/agents/helper/runs", json={"input": "Look up a and b"}, headers=[
        ("traceparent", f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"), ("traceparent", f"00-{other}-{CLIENT_SPAN}-01")])
    assert response.status_code == 202, response.text
    app.settle()
    traces = {f"{s.context.trace_id:032x}" for s in sink.spans()}
    assert len(traces) == 1 and traces.isdisjoint({CLIENT_TRACE, other})
    assert next(s for s in sink.spans() if s.name == "invoke_agent helper").parent is None


WITH_APPROVAL = Script.of(
    Reply.call("lookup", {"key": "a"}),
    Reply.call("send_email", {"to": "bob@example.com", "subject": "Hi", "body": "Hello"}),
    "Sent.",
)


def orchestrator_episodes(app: InProcessApp, run_id: str) -> int:
    """Episodes the orchestrator ran: the first, then one per completion, event or timer (each replays it all)."""
    history = app.history(run_id)["historyEvents"]
    return 1 + sum(1 for e in history if e["EventType"] in ("TaskCompleted", "EventRaised", "TimerFired"))


def test_an_approval_three_days_later_stays_in_the_runs_trace(
    app: InProcessApp, model: ScriptedModelServer, sink: TelemetrySink
) -> None:
    latencies_before = sum(p.count for p in sink.metric_points("agent_run.approval.latency"))
    model.set_script(WITH_APPROVAL)
    view = app.start_until_approval(input="Look a up and email Bob", approval_timeout_seconds=4 * 86400)
    assert names(sink.spans()) == ["chat scripted-model", "chat scripted-model", "execute_tool lookup"]
    app.advance(3 * 86400)  # durable time: the run waits three days, holding nothing
    [approval_id] = [a["approval_id"] for a in view["pending_approvals"]]
    decided = app.decide(view["run_id"], approval_id, "approve", reason="fine")
    assert decided.status_code == 202
    app.http.post(  # the same decision again, as a double-click sends it: one decision, one span
        f"/api/runs/{view['run_id']}/approvals/{approval_id}", json={"decision": "approve"}
    )
    app.settle()
    assert app.view(view["run_id"])["status"] == "completed"

    spans = sink.spans()
    assert names(spans) == [
        "await_approval send_email", "chat scripted-model", "chat scripted-model", "chat scripted-model",
        "execute_tool lookup", "execute_tool send_email", "invoke_agent helper",
    ]
    assert len({span.context.trace_id for span in spans}) == 1
    run_span = next(s for s in spans if s.name == "invoke_agent helper")
    assert all(s.parent.span_id == run_span.context.span_id for s in spans if s is not run_span)
    wait = next(s for s in spans if s.name.startswith("await_approval"))
    assert wait.attributes["agent_run.approval.decision"] == "approved"
    assert wait.attributes["agent_run.approval.id"] == approval_id
    assert wait.attributes["gen_ai.tool.name"] == "send_email"
    [record] = app.approvals(view["run_id"])
    assert wait.start_time < wait.end_time
    assert wait.end_time == int(_parse(record["decided_at"]).timestamp() * 1_000_000_000)
    assert sum(p.count for p in sink.metric_points("agent_run.approval.latency")) == latencies_before + 1
    # The orchestrator replayed its history on every episode; only activities made spans.
    assert orchestrator_episodes(app, view["run_id"]) > len(spans)


def test_the_approver_and_an_expired_wait_are_recorded(
    app: InProcessApp, model: ScriptedModelServer, sink: TelemetrySink
) -> None:
    model.set_script(WITH_APPROVAL)
    view = app.start_until_approval(input="Look a up and email Bob")
    approval_id = view["pending_approvals"][0]["approval_id"]
    app.http.post(
        f"/api/runs/{view['run_id']}/approvals/{approval_id}",
        json={"decision": "reject", "reason": "no"},
        headers={"x-ms-client-principal-name": "alice@example.com"},
    )
    app.settle()
    wait = next(s for s in sink.spans() if s.name.startswith("await_approval"))
    assert wait.attributes["agent_run.approval.decision"] == "rejected"
    # AUTH_MODE=none: principal headers are ignored, the one principal is `anonymous`
    assert wait.attributes["agent_run.approval.decided_by"] == "anonymous"
    # The rejected call was not executed: no execute_tool span for it.
    assert names(s for s in sink.spans() if s.name.startswith("execute_tool")) == ["execute_tool lookup"]

    sink.clear()
    model.set_script(WITH_APPROVAL)
    view = app.start_until_approval(input="Again", session_id=view["session_id"])
    app.advance(86400 + 1)  # the default approval timeout passes: the request expires
    assert app.view(view["run_id"])["status"] == "completed"
    wait = next(s for s in sink.spans() if s.name.startswith("await_approval"))
    assert wait.attributes["agent_run.approval.decision"] == "expired"


def test_message_content_is_captured_only_when_asked(
    model_server: ScriptedModelServer, model: ScriptedModelServer, sink: TelemetrySink, monkeypatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    settings = app_settings(model_server.base_url, SESSION_STORE_PATH=":memory:")
    with running_app(settings, "sqlite") as app:
        model.set_script(FIVE_STEPS)
        run_to_end(app)
    chats = sorted((s for s in sink.spans() if s.name.startswith("chat")), key=lambda s: s.start_time)
    first_in = json.loads(chats[0].attributes["gen_ai.input.messages"])
    assert first_in[-1] == {"role": "user", "parts": [{"type": "text", "content": "Look up a and b"}]}
    first_out = json.loads(chats[0].attributes["gen_ai.output.messages"])
    assert first_out[0]["parts"][0]["type"] == "tool_call" and first_out[0]["parts"][0]["name"] == "lookup"
    last_in = json.loads(chats[2].attributes["gen_ai.input.messages"])
    assert {"type": "tool_call_response", "id": last_in[-1]["parts"][0]["id"],
            "response": {"key": "b", "value": "value-of-b"}} == last_in[-1]["parts"][0]
    assert json.loads(chats[2].attributes["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "text", "content": "Both found."}
    ]


def test_metrics_count_tokens_steps_and_runs(app: InProcessApp, model: ScriptedModelServer, sink) -> None:
    def total(name: str, **attributes: str) -> float:
        points = [p for p in sink.metric_points(name) if attributes.items() <= dict(p.attributes).items()]
        return sum(getattr(p, "sum", None) or getattr(p, "value", 0) for p in points)

    def count(name: str, **attributes: str) -> int:
        points = [p for p in sink.metric_points(name) if attributes.items() <= dict(p.attributes).items()]
        return sum(p.count for p in points)

    before_runs = total("agent_run.runs", **{"gen_ai.agent.name": "helper", "agent_run.status": "completed"})
    before_input = total("gen_ai.client.token.usage", **{"gen_ai.token.type": "input", "gen_ai.agent.name": "helper"})
    before_tools = count("agent_run.step.duration", **{"agent_run.step": "execute_tool", "gen_ai.agent.name": "helper"})
    before_durations = count("agent_run.duration", **{"gen_ai.agent.name": "helper"})
    model.set_script(FIVE_STEPS)
    view = run_to_end(app)

    assert total("agent_run.runs", **{"gen_ai.agent.name": "helper", "agent_run.status": "completed"}) == (
        before_runs + 1
    )
    used = total("gen_ai.client.token.usage", **{"gen_ai.token.type": "input", "gen_ai.agent.name": "helper"})
    assert used - before_input == view["usage"]["input_tokens"]
    tools = count("agent_run.step.duration", **{"agent_run.step": "execute_tool", "gen_ai.agent.name": "helper"})
    assert tools - before_tools == 2
    assert count("agent_run.duration", **{"gen_ai.agent.name": "helper"}) == before_durations + 1


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_run_that_continues_as_new_stays_one_trace(app: InProcessApp, model: ScriptedModelServer, sink) -> None:
    lookups = [Reply.call("lookup", {"key": f"k{i}"}) for i in range(10)]
    model.set_script(Script.of(*lookups, "All ten found."))
    view = run_to_end(app)
    assert view["status"] == "completed"
    assert json.loads(app.history(view["run_id"])["input"])["generation"] >= 1  # it continued as new

    spans = sink.spans()
    assert Counter(s.name for s in spans) == {
        "invoke_agent helper": 1, "chat scripted-model": 11, "execute_tool lookup": 10
    }
    assert len({s.context.trace_id for s in spans}) == 1
    run_span = next(s for s in spans if s.name == "invoke_agent helper")
    assert all(s.parent.span_id == run_span.context.span_id for s in spans if s is not run_span)
