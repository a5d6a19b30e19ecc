"""Configure OpenTelemetry once per process from the standard environment.

- `APPLICATIONINSIGHTS_CONNECTION_STRING`: Azure Monitor (`azure-monitor-opentelemetry`'s
  `configure_azure_monitor`: traces, metrics and logs to Application Insights); the variables below are then its own;
- `OTEL_TRACES_EXPORTER`: `console`, `otlp` or `none` (comma-separated for several); unset: `otlp` when an OTLP
  endpoint is set, else nothing;
- `OTEL_METRICS_EXPORTER`: the same for metrics;
- `OTEL_EXPORTER_OTLP_ENDPOINT` (and `..._TRACES_ENDPOINT`, `..._METRICS_ENDPOINT`, `..._HEADERS`): OTLP/HTTP;
- `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`: the resource (service name default `durable-agents`);
- `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`: chat spans carry the messages (off by default);
- `OTEL_BSP_*`, `OTEL_METRIC_EXPORT_INTERVAL`, `OTEL_TRACES_SAMPLER`: as the OpenTelemetry SDK defines them.

With nothing set nothing is configured: the API stays a no-op (or whatever provider the process already installed,
e.g. a test's in-memory exporter). The app calls `configure_telemetry()` when it is imported; devhost worker
processes import the app too, so each process configures itself once.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor

log = logging.getLogger(__name__)
DEFAULT_SERVICE_NAME = "durable-agents"
_EXPORTERS = frozenset({"console", "otlp", "none"})
_lock = threading.Lock()
_configured: TelemetryPlan | None = None


@dataclass(frozen=True)
class TelemetryPlan:
    """What the environment asks for: `azure_monitor`, `sdk` (with its exporters) or `none`."""

    kind: Literal["azure_monitor", "sdk", "none"]
    traces: frozenset[str] = frozenset()
    metrics: frozenset[str] = frozenset()


def configure_telemetry(environ: Mapping[str, str] | None = None) -> TelemetryPlan:
    """Configure this process once from the environment; returns the plan, then the same one on every later call."""
    global _configured
    with _lock:
        if _configured is None:
            _configured = telemetry_plan(os.environ if environ is None else environ)
            apply(_configured)
        return _configured


def telemetry_plan(env: Mapping[str, str]) -> TelemetryPlan:
    if env.get("APPLICATIONINSIGHTS_CONNECTION_STRING"):
        return TelemetryPlan("azure_monitor")
    traces = _exporters(env, "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    meters = _exporters(env, "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
    if not traces and not meters:
        return TelemetryPlan("none")
    return TelemetryPlan("sdk", frozenset(traces), frozenset(meters))


def apply(plan: TelemetryPlan) -> None:
    """Install the plan's providers as this process's global ones (OpenTelemetry takes the first only)."""
    if plan.kind == "azure_monitor":
        from azure.monitor.opentelemetry import configure_azure_monitor  # heavy: only when asked for

        # Reads APPLICATIONINSIGHTS_CONNECTION_STRING itself; credentials stay with the distro.
        configure_azure_monitor(resource=_resource())
        log.info("OpenTelemetry: Azure Monitor")
        return
    if plan.kind == "none":
        return
    resource = _resource()
    if plan.traces:
        trace.set_tracer_provider(tracer_provider(set(plan.traces), resource))
    if plan.metrics:
        metrics.set_meter_provider(meter_provider(set(plan.metrics), resource))
    log.info("OpenTelemetry: traces %s, metrics %s", sorted(plan.traces) or "off", sorted(plan.metrics) or "off")


def _exporters(env: Mapping[str, str], variable: str, signal_endpoint: str) -> set[str]:
    value = env.get(variable)
    if value is None or not value.strip():
        has_endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get(signal_endpoint)
        return {"otlp"} if has_endpoint else set()
    names = {name.strip().lower() for name in value.split(",") if name.strip()}
    unknown = names - _EXPORTERS
    if unknown:
        raise ValueError(f"{variable}: unsupported exporter(s) {sorted(unknown)}; use console, otlp or none")
    return names - {"none"}


def _resource() -> Resource:
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return resource


def tracer_provider(exporters: set[str], resource: Resource | None = None) -> TracerProvider:
    provider = TracerProvider(resource=resource or _resource())
    if "console" in exporters:
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))  # a local look: print at once
    if "otlp" in exporters:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


def meter_provider(exporters: set[str], resource: Resource | None = None) -> MeterProvider:
    readers: list[MetricReader] = []
    if "console" in exporters:
        readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter()))
    if "otlp" in exporters:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    return MeterProvider(resource=resource or _resource(), metric_readers=readers)
