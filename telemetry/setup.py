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
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from opentelemetry import metrics, trace

from telemetry.log_redaction import install_log_redaction
from telemetry.settings import TelemetrySettings

if TYPE_CHECKING:  # the SDK is imported only when a plan installs it: a process with nothing configured never loads it
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

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


def configure_telemetry(settings: TelemetrySettings | None = None) -> TelemetryPlan:
    """Configure this process once from its settings (default: the environment); returns the plan, then the same
    one on every later call."""
    global _configured
    with _lock:
        if _configured is None:
            install_log_redaction()  # log records leave the process (stderr, the host, Azure Monitor) redacted
            _configured = telemetry_plan(settings or TelemetrySettings())
            apply(_configured)
        return _configured


def telemetry_plan(settings: TelemetrySettings) -> TelemetryPlan:
    if settings.applicationinsights_connection_string is not None:
        return TelemetryPlan("azure_monitor")
    endpoint = settings.otlp_endpoint
    traces = _exporters("OTEL_TRACES_EXPORTER", settings.traces_exporter, endpoint or settings.otlp_traces_endpoint)
    meters = _exporters("OTEL_METRICS_EXPORTER", settings.metrics_exporter, endpoint or settings.otlp_metrics_endpoint)
    if not traces and not meters:
        return TelemetryPlan("none")
    return TelemetryPlan("sdk", frozenset(traces), frozenset(meters))


def apply(plan: TelemetryPlan) -> None:
    """Install the plan's providers as this process's global ones (OpenTelemetry takes the first only)."""
    if plan.kind == "azure_monitor":
        from azure.monitor.opentelemetry import configure_azure_monitor  # heavy: only when asked for

        from telemetry.redaction import RedactingSpanProcessor  # the SDK's trace module: only when spans leave

        # Reads APPLICATIONINSIGHTS_CONNECTION_STRING itself; credentials stay with the distro.
        # Its exporter gets the spans after the redacting processor (telemetry.redaction).
        configure_azure_monitor(resource=_resource(), span_processors=[RedactingSpanProcessor()])
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


def _exporters(variable: str, value: str | None, endpoint: str | None) -> set[str]:
    """The exporters `variable` names; unset: OTLP when an OTLP endpoint is set (as the SDK's own default is)."""
    if value is None or not value.strip():
        return {"otlp"} if endpoint else set()
    names = {name.strip().lower() for name in value.split(",") if name.strip()}
    unknown = names - _EXPORTERS
    if unknown:
        raise ValueError(f"{variable}: unsupported exporter(s) {sorted(unknown)}; use console, otlp or none")
    return names - {"none"}


def _resource() -> Resource:
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return resource


def tracer_provider(exporters: set[str], resource: Resource | None = None) -> TracerProvider:
    """Spans leave through the exporters redacted (`telemetry.redaction`)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor

    from telemetry.redaction import RedactingSpanExporter

    provider = TracerProvider(resource=resource or _resource())
    if "console" in exporters:
        # a local look: print at once
        provider.add_span_processor(SimpleSpanProcessor(RedactingSpanExporter(ConsoleSpanExporter())))
    if "otlp" in exporters:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(RedactingSpanExporter(OTLPSpanExporter())))
    return provider


def meter_provider(exporters: set[str], resource: Resource | None = None) -> MeterProvider:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader

    readers: list[MetricReader] = []
    if "console" in exporters:
        readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter()))
    if "otlp" in exporters:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    return MeterProvider(resource=resource or _resource(), metric_readers=readers)
