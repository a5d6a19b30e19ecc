"""One trace per run across SIGKILLs: `python -m devhost` in a child process exports its spans over OTLP/HTTP to a
receiver this test runs on loopback. A run with a tool call, an approval and three model calls is killed while it
waits for the approval and again while its last model call is in flight, and restarted each time: the receiver gets
exactly one `invoke_agent`, three `chat`, two `execute_tool` and one `await_approval` span, all in one trace under
the run span (the restarted host replays the orchestration without emitting anything again).

A priced run's cost reaches the receiver as the `agent_run.cost` counter (the in-process sink's check, made where the
real worker runs the app: `test_e2e_spend.py`). And `OTEL_TRACES_EXPORTER=console` prints the run's spans to the
host's output."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_harness import FINAL, PROGRESS_TIMEOUT_S, AppClient
from e2e_settings import E2E_DIR, REPO_ROOT, app_settings
from otlp_receiver import APP_SCOPE, OtlpReceiver

from devhost.testing import SubprocessHost
from scripted_model import Reply, Script, ScriptedModelServer

pytestmark = pytest.mark.slow
EMAIL = {"to": "bob@example.com", "subject": "Hi", "body": "Hello Bob"}
# The last answer is the default: the call killed in flight took its turn, the redelivered one gets it again.
SCRIPT = Script(
    turns=[Reply.call("lookup", {"key": "a"}), Reply.call("send_email", EMAIL)], default=Reply(text="Sent.")
)


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver().start()
    yield receiver
    receiver.stop()


def child_host(tmp_path: Path, model: ScriptedModelServer, workers: int | None = None, **otel: str) -> SubprocessHost:
    env = app_settings(
        model.base_url,
        SESSION_STORE_PATH=str(tmp_path / "sessions.sqlite3"),
        PYTHONPATH=str(E2E_DIR),
        OTEL_SERVICE_NAME="durable-agents-test",
        **otel,
    )
    return SubprocessHost(REPO_ROOT, state_path=tmp_path / "devhost.sqlite3", env=env, workers=workers)


def test_one_trace_across_two_kills_and_an_approval(
    tmp_path: Path, model: ScriptedModelServer, receiver: OtlpReceiver
) -> None:
    model.set_script(SCRIPT)
    host = child_host(
        tmp_path, model,
        OTEL_TRACES_EXPORTER="otlp", OTEL_METRICS_EXPORTER="none",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY="50",
    )
    host.start()
    try:
        api = AppClient(host.client)
        started = api.start(input="Look a up, then email Bob")
        waiting = api.wait_for(started["run_id"], {"requires_action"})
        receiver.wait_for(3, PROGRESS_TIMEOUT_S, APP_SCOPE)  # chat, execute_tool lookup, chat: exported before the kill

        host.kill()  # 1: while the run waits for the approval
        host.start()
        model.hold_answers()
        approval_id = waiting["pending_approvals"][0]["approval_id"]
        assert api.decide(started["run_id"], approval_id, "approve").status_code == 202
        model.log.wait_for(3, timeout=PROGRESS_TIMEOUT_S)  # the last model call is in flight
        receiver.wait_for(5, PROGRESS_TIMEOUT_S, APP_SCOPE)  # + await_approval, execute_tool send_email

        host.kill()  # 2: while the last model call runs (its span never ended, so it was never exported)
        host.start()
        model.release_answers()
        final = api.wait_for(started["run_id"], FINAL)
        assert final["status"] == "completed", final
        assert final["output"]["text"] == "Sent."
        spans = receiver.wait_for(7, PROGRESS_TIMEOUT_S, APP_SCOPE)
    finally:
        host.close()

    assert sorted(s.name for s in spans) == [
        "await_approval send_email", "chat scripted-model", "chat scripted-model", "chat scripted-model",
        "execute_tool lookup", "execute_tool send_email", "invoke_agent helper",
    ]
    assert len({s.trace_id for s in spans}) == 1
    run_span = next(s for s in spans if s.name == "invoke_agent helper")
    assert run_span.parent_span_id == ""  # the run is the root of its trace
    assert all(s.parent_span_id == run_span.span_id for s in spans if s is not run_span)
    assert all(run_span.start_ns <= s.start_ns and s.end_ns <= run_span.end_ns for s in spans)
    assert run_span.attributes["agent_run.id"] == started["run_id"]
    assert run_span.attributes["gen_ai.usage.output_tokens"] == final["usage"]["output_tokens"]
    assert model.log.total == 4  # the last call was asked again after the kill: still one span for it


def test_worker_processes_configure_themselves_and_share_the_trace(
    tmp_path: Path, model: ScriptedModelServer, receiver: OtlpReceiver
) -> None:
    """Activities run in worker processes (each imports the app, so each configures OpenTelemetry once)."""
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), Reply.call("lookup", {"key": "b"}), "Found."))
    host = child_host(
        tmp_path, model, workers=2,
        OTEL_TRACES_EXPORTER="otlp", OTEL_METRICS_EXPORTER="none",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY="50",
    )
    host.start()
    try:
        api = AppClient(host.client)
        started = api.start(input="Look a and b up")
        assert api.wait_for(started["run_id"], FINAL)["status"] == "completed"
        spans = receiver.wait_for(6, PROGRESS_TIMEOUT_S, APP_SCOPE)
    finally:
        host.close()
    assert sorted(s.name for s in spans) == [
        "chat scripted-model", "chat scripted-model", "chat scripted-model",
        "execute_tool lookup", "execute_tool lookup", "invoke_agent helper",
    ]
    assert len({s.trace_id for s in spans}) == 1


def test_the_cost_metric_reaches_the_collector(
    tmp_path: Path, model: ScriptedModelServer, receiver: OtlpReceiver
) -> None:
    """A priced run's cost as a collector receives it from the processes that ran its model calls (the worker's own
    in the real-worker run), by agent and model: the same figure as the run's usage."""
    usage = {"prompt_tokens": 100, "completion_tokens": 10}
    model.set_script(Script.of(Reply(text="Hi.", usage=usage)))
    host = child_host(
        tmp_path, model,
        MODEL_PRICES=json.dumps({"scripted-model": {"input": 1000, "output": 2000}}),  # per 1M: 0.1 + 0.02
        OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_METRIC_EXPORT_INTERVAL="100",
    )
    host.start()
    try:
        api = AppClient(host.client)
        view = api.wait_for(api.start(input="Say hi")["run_id"], FINAL)
        wanted = {"gen_ai.agent.name": "helper", "gen_ai.request.model": "scripted-model"}
        cost = receiver.wait_for_total("agent_run.cost", 0.12, PROGRESS_TIMEOUT_S, **wanted)
    finally:
        host.close()
    assert view["status"] == "completed" and view["usage"]["cost"] == pytest.approx(0.12)
    assert cost == pytest.approx(0.12), receiver.points


def test_the_console_exporter_prints_the_runs_spans(tmp_path: Path, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), "Found."))
    host = child_host(tmp_path, model, OTEL_TRACES_EXPORTER="console")
    host.start()
    try:
        api = AppClient(host.client)
        started = api.start(input="Look a up")
        assert api.wait_for(started["run_id"], FINAL)["status"] == "completed"
    finally:
        host.stop()
        output = host.output()
        host.close()
    spans = _json_objects(output)
    named = {span["name"]: span for span in spans if "context" in span}
    assert {"invoke_agent helper", "chat scripted-model", "execute_tool lookup"} <= set(named)
    run = named["invoke_agent helper"]
    assert run["attributes"]["agent_run.id"] == started["run_id"]
    assert run["resource"]["attributes"]["service.name"] == "durable-agents-test"
    assert named["chat scripted-model"]["parent_id"] == run["context"]["span_id"]


def _json_objects(text: str) -> list[dict]:
    """The JSON objects in a log that mixes them with other lines (the console exporter prints indented JSON)."""
    decoder, found, index = json.JSONDecoder(), [], 0
    while (start := text.find("{\n", index)) != -1:
        try:
            value, index = decoder.raw_decode(text, start)
            found.append(value)
        except json.JSONDecodeError:
            index = start + 1
    return found
