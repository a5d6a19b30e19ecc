"""The model's API key never leaves the process, whatever the endpoint echoes: `python -m devhost` in a child process
with a real OpenAI-compatible provider setting (`OPENAI_API_KEY`), the scripted model endpoint answering every call
with a 400 whose message echoes the request's `Authorization` header (as some proxies do), and each exporter kind the
app supports: OTLP/HTTP traces and metrics to a real receiver on loopback (`otlp_receiver.py`, every export kept as
received), console traces and metrics, and the logs the host writes. A failed run through the run API and a failed
`POST /v1/responses`: the key is in no span, span event (`exception.message`, `exception.stacktrace`), metric, log
line or response body - while the chat span does carry the (redacted) exception.

The key has no credential shape (not `sk-...`, not a JWT, not 32 letters and digits): only the app's knowledge of its
own secret finds it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from e2e_harness import FINAL, PROGRESS_TIMEOUT_S, AppClient
from e2e_settings import E2E_DIR, REPO_ROOT, app_settings
from otlp_receiver import OtlpReceiver

from devhost.testing import SubprocessHost
from scripted_model import Fault, Reply, Script, ScriptedModelServer

pytestmark = pytest.mark.slow
API_KEY = "proxy-key-Zq7x-4711-do-not-leak"
ECHOING = Script(turns=[], default=Reply.fail(Fault(status=400, message="bad request", echo_header="Authorization")))


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver().start()
    yield receiver
    receiver.stop()


def child_host(tmp_path: Path, model: ScriptedModelServer, **otel: str) -> SubprocessHost:
    env = app_settings(
        model.base_url,
        MODEL_PROVIDER="compatible",
        OPENAI_BASE_URL=model.base_url,
        OPENAI_API_KEY=API_KEY,
        MODEL_RETRY_MAX_ATTEMPTS="1",
        SESSION_STORE_PATH=str(tmp_path / "sessions.sqlite3"),
        PYTHONPATH=str(E2E_DIR),
        OTEL_SERVICE_NAME="durable-agents-test",
        OTEL_BSP_SCHEDULE_DELAY="50",
        OTEL_METRIC_EXPORT_INTERVAL="200",
        **otel,
    )
    return SubprocessHost(REPO_ROOT, state_path=tmp_path / "devhost.sqlite3", env=env)


def fail_two_ways(host: SubprocessHost, model: ScriptedModelServer) -> list[str]:
    """A run through the run API and a `/v1/responses` call, both failed by the echoing endpoint; every response
    body the client saw."""
    api = AppClient(host.client)
    started = api.start(input="hello")
    final = api.wait_for(started["run_id"], FINAL)
    assert final["status"] == "failed", final
    assert "bad request" in final["error"]["message"]
    bodies = [host.client.get(f"/api/runs/{started['run_id']}").text]
    bodies.append(host.client.get(f"/api/sessions/{started['session_id']}/messages").text)
    responses = httpx.post(
        f"{host.base_url}/api/v1/responses", json={"model": "helper", "input": "hi"}, timeout=120, trust_env=False
    )
    bodies.append(responses.text)
    # The endpoint really echoed the key to the app.
    assert model.log.requests and all(r.headers.get("authorization") == f"Bearer {API_KEY}" for r in model.log.requests)
    return bodies


def test_otlp_traces_metrics_logs_and_responses_never_carry_the_key(
    tmp_path: Path, model: ScriptedModelServer, receiver: OtlpReceiver
) -> None:
    model.set_script(ECHOING)
    host = child_host(
        tmp_path,
        model,
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_METRICS_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
    )
    host.start()
    try:
        bodies = fail_two_ways(host, model)
        spans = receiver.wait_for(2, PROGRESS_TIMEOUT_S)
        deadline = time.monotonic() + PROGRESS_TIMEOUT_S
        while not any(path == "/v1/metrics" for path, _ in receiver.raw) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        host.stop()
    assert any(s.name.startswith("chat") for s in spans)
    traces = b"".join(body for path, body in receiver.raw if path == "/v1/traces")
    metrics = b"".join(body for path, body in receiver.raw if path == "/v1/metrics")
    assert b"exception.stacktrace" in traces and b"***" in traces  # the exception is there, redacted
    assert metrics, "no metrics were exported"
    assert API_KEY.encode() not in traces + metrics
    for body in bodies:
        assert API_KEY not in body, body
    assert API_KEY not in host.output()


def test_console_exporters_and_logs_never_carry_the_key(tmp_path: Path, model: ScriptedModelServer) -> None:
    model.set_script(ECHOING)
    host = child_host(tmp_path, model, OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="console")
    host.start()
    try:
        bodies = fail_two_ways(host, model)
        # The span with the failure and a metrics export (the console exporters write on their own schedule).
        expected = ('"exception.stacktrace"', "gen_ai.client.operation.duration")
        deadline = time.monotonic() + PROGRESS_TIMEOUT_S
        while not all(text in host.output() for text in expected) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        host.stop()
    output = host.output()
    assert '"exception.stacktrace"' in output and "gen_ai.client.operation.duration" in output, output[-3000:]
    assert API_KEY not in output
    for body in bodies:
        assert API_KEY not in body
