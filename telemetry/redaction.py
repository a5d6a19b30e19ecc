"""Telemetry leaves the process only through `agent_runtime.redaction.redact`.

- spans: every exporter the app configures is wrapped in `RedactingSpanExporter`, which exports a copy of each span
  with its name, attributes, events (an exception's `exception.message` and `exception.stacktrace` included: the SDK
  records exceptions with their chained causes) and status description redacted; Azure Monitor's exporter, which its
  distro builds, comes after a `RedactingSpanProcessor`;
- logs: `install_log_redaction` makes every log record redacted when it is created (message, arguments, the
  formatted traceback of `exc_info` and `stack_info`), so every handler (stderr, the Functions host, Azure Monitor)
  gets the redacted text;
- metrics: `telemetry.metrics` redacts the attribute values it records.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Status

from agent_runtime.redaction import redact, redact_attributes
from telemetry.log_redaction import install_log_redaction


def redacted_span(span: ReadableSpan) -> ReadableSpan:
    status = span.status
    description = redact(status.description) if status.description else status.description
    return ReadableSpan(
        name=redact(span.name),
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=redact_attributes(span.attributes),
        events=[Event(e.name, redact_attributes(e.attributes), e.timestamp) for e in span.events],
        links=span.links,
        kind=span.kind,
        status=Status(status.status_code, description),
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class RedactingSpanExporter(SpanExporter):
    """Exports what `inner` would, redacted."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.inner.export([redacted_span(span) for span in spans])

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class RedactingSpanProcessor(SpanProcessor):
    """For exporters the app does not build (Azure Monitor's distro): registered before them, it redacts the ended
    span they are handed next (the SDK gives every processor the same read-only copy; the copy's fields are private,
    so this is the fallback, `RedactingSpanExporter` the rule)."""

    def on_end(self, span: ReadableSpan) -> None:
        clean = redacted_span(span)
        span._name, span._attributes, span._events, span._status = (  # private: see the docstring
            clean.name,
            clean.attributes,
            clean.events,
            clean.status,
        )


__all__ = ["RedactingSpanExporter", "RedactingSpanProcessor", "install_log_redaction", "redacted_span"]
