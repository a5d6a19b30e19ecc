"""Telemetry configuration from the standard environment: nothing when nothing is set, console/otlp exporters for
traces and metrics, Azure Monitor's distro when a connection string is set (Azure itself is not reachable here, so
its `configure_azure_monitor` is replaced by a recorder: the one thing mocked, and said so)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor

from telemetry.redaction import RedactingSpanExporter, RedactingSpanProcessor
from telemetry.settings import TelemetrySettings
from telemetry.setup import TelemetryPlan, apply, meter_provider, telemetry_plan, tracer_provider

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("env", "plan"),
    [
        ({}, TelemetryPlan("none")),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}, TelemetryPlan("none")),
        ({"OTEL_TRACES_EXPORTER": "console"}, TelemetryPlan("sdk", frozenset({"console"}))),
        (
            {"OTEL_TRACES_EXPORTER": "console, otlp", "OTEL_METRICS_EXPORTER": "otlp"},
            TelemetryPlan("sdk", frozenset({"console", "otlp"}), frozenset({"otlp"})),
        ),
        (  # an endpoint alone means OTLP for both signals, as the SDK's own default is otlp
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
            TelemetryPlan("sdk", frozenset({"otlp"}), frozenset({"otlp"})),
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_METRICS_EXPORTER": "none"},
            TelemetryPlan("sdk", frozenset({"otlp"})),
        ),
        (
            {"APPLICATIONINSIGHTS_CONNECTION_STRING": "InstrumentationKey=0", "OTEL_TRACES_EXPORTER": "console"},
            TelemetryPlan("azure_monitor"),
        ),
    ],
)
def test_the_plan_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], plan: TelemetryPlan
) -> None:
    assert telemetry_plan(settings_from(monkeypatch, env)) == plan


def test_an_unknown_exporter_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_from(monkeypatch, {"OTEL_TRACES_EXPORTER": "zipkin"})
    with pytest.raises(ValueError, match="OTEL_TRACES_EXPORTER"):
        telemetry_plan(settings)


@pytest.mark.parametrize(("value", "captured"), [("true", True), (" TRUE ", True), ("false", False), ("1", False),
                                                 ("", False), (None, False)])
def test_message_content_is_captured_only_when_set_to_true(
    monkeypatch: pytest.MonkeyPatch, value: str | None, captured: bool
) -> None:
    env = {} if value is None else {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": value}
    assert settings_from(monkeypatch, env).capture_message_content is captured


def settings_from(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> TelemetrySettings:
    """The settings the app reads with exactly `env` set of the telemetry variables (the real environment path)."""
    for field in TelemetrySettings.model_fields.values():
        monkeypatch.delenv(str(field.validation_alias), raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return TelemetrySettings()


def test_exporters_are_the_official_ones() -> None:
    provider = tracer_provider({"console", "otlp"})
    processors = provider._active_span_processor._span_processors  # the SDK keeps no public list
    # Each official exporter behind the one redaction (telemetry.redaction).
    assert [(type(p), type(p.span_exporter), type(p.span_exporter.inner)) for p in processors] == [
        (SimpleSpanProcessor, RedactingSpanExporter, ConsoleSpanExporter),  # printed at once: a local look at a run
        (BatchSpanProcessor, RedactingSpanExporter, OTLPSpanExporter),
    ]
    assert provider.resource.attributes["service.name"] == "durable-agents"
    provider.shutdown()
    meter_provider({"console"}).shutdown()


def test_azure_monitor_is_configured_through_its_distro(monkeypatch: pytest.MonkeyPatch) -> None:
    import azure.monitor.opentelemetry as distro

    calls: list[dict] = []
    monkeypatch.setattr(distro, "configure_azure_monitor", lambda **kwargs: calls.append(kwargs))  # no Azure here
    monkeypatch.setenv("OTEL_SERVICE_NAME", "my-agents")
    apply(TelemetryPlan("azure_monitor"))
    [call] = calls
    assert call["resource"].attributes["service.name"] == "my-agents"
    assert [type(p) for p in call["span_processors"]] == [RedactingSpanProcessor]  # before the distro's exporter


def run_app_import(env: dict[str, str]) -> dict:
    """Import the app in a fresh process with `env` and report what OpenTelemetry ended up with."""
    script = (
        "import json, function_app\n"
        "from opentelemetry import metrics, trace\n"
        "from telemetry.settings import TelemetrySettings\n"
        "from telemetry.setup import configure_telemetry\n"
        "print(json.dumps({'tracer': type(trace.get_tracer_provider()).__name__,\n"
        "  'meter': type(metrics.get_meter_provider()).__name__,\n"
        "  'again': configure_telemetry(TelemetrySettings(OTEL_TRACES_EXPORTER='otlp')).kind}))\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "APPLICATIONINSIGHTS_"))}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, env={**clean, "SESSION_STORE_PATH": ":memory:", **env},
        capture_output=True, text=True, timeout=120, check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_app_configures_once_and_exports_nothing_unless_asked() -> None:
    assert run_app_import({}) == {"tracer": "ProxyTracerProvider", "meter": "_ProxyMeterProvider", "again": "none"}
    configured = run_app_import({"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "console"})
    assert configured == {"tracer": "TracerProvider", "meter": "MeterProvider", "again": "sdk"}
