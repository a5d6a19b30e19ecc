"""For tests: an in-memory OpenTelemetry sink for this process. An SDK tracer provider with an in-memory span
exporter and a meter provider with an in-memory reader, installed once (OpenTelemetry allows one global provider per
process). In-process hosts (`devhost.testing.InProcessHost`) run the app's activities in the test's process, so
everything the app records lands here:

    sink = telemetry_sink(); sink.clear()
    ... run something on an InProcessHost ...
    assert names(sink.spans()) == [...]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class TelemetrySink:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        metrics.set_meter_provider(MeterProvider(metric_readers=[self.reader]))

    def clear(self) -> None:
        self.exporter.clear()
        self.reader.get_metrics_data()  # collecting resets nothing for cumulative sums: tests compare deltas

    def spans(self, trace_id: str | None = None) -> list[ReadableSpan]:
        spans = list(self.exporter.get_finished_spans())
        return [s for s in spans if trace_id is None or f"{s.context.trace_id:032x}" == trace_id]

    def metric_points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        points: list[Any] = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points


def names(spans: Iterable[ReadableSpan]) -> list[str]:
    return sorted(span.name for span in spans)


_sink: TelemetrySink | None = None


def telemetry_sink() -> TelemetrySink:
    global _sink
    if _sink is None:
        _sink = TelemetrySink()
    return _sink
