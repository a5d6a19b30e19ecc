"""A minimal OTLP/HTTP receiver on loopback: what a collector would receive from the app's OTLP exporters (protobuf
`ExportTraceServiceRequest` POSTed to `/v1/traces`, `ExportMetricsServiceRequest` to `/v1/metrics`), decoded with the
official OTLP protobuf classes."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

# The app's own spans: its tracers are `durable_agents` and `durable_agents.runs` (telemetry.spans.TRACER_NAME).
# Frameworks in the app's process may add spans of their own through the same provider (FastAPI's built-in telemetry
# in the worker's HTTP proxy on Python 3.13+).
APP_SCOPE = "durable_agents"


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    scope: str
    trace_id: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ReceivedPoint:
    """One data point of a sum (a counter), as exported: cumulative since `start_ns` in the process that sent it."""

    metric: str
    start_ns: int
    time_ns: int
    value: float
    attributes: dict[str, Any] = field(default_factory=dict)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in any_value.array_value.values)
    return getattr(any_value, kind) if kind else None


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.points: list[ReceivedPoint] = []
        self.raw: list[tuple[str, bytes]] = []  # every export as received: (path, protobuf body)
        self._changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with receiver._changed:
                    receiver.raw.append((self.path, body))
                if self.path == "/v1/traces":
                    receiver._receive(ExportTraceServiceRequest.FromString(body))
                    payload = ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics":
                    receiver._receive_metrics(ExportMetricsServiceRequest.FromString(body))
                    payload = ExportMetricsServiceResponse().SerializeToString()
                else:
                    payload = b""  # logs: accepted, ignored
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _receive(self, request: ExportTraceServiceRequest) -> None:
        received = [
            ReceivedSpan(
                name=span.name,
                scope=scope_spans.scope.name,
                trace_id=span.trace_id.hex(),
                span_id=span.span_id.hex(),
                parent_span_id=span.parent_span_id.hex(),
                start_ns=span.start_time_unix_nano,
                end_ns=span.end_time_unix_nano,
                attributes={kv.key: _value(kv.value) for kv in span.attributes},
            )
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        with self._changed:
            self.spans.extend(received)
            self._changed.notify_all()

    def _receive_metrics(self, request: ExportMetricsServiceRequest) -> None:
        received = [
            ReceivedPoint(
                metric=metric.name,
                start_ns=point.start_time_unix_nano,
                time_ns=point.time_unix_nano,
                value=point.as_double if point.HasField("as_double") else float(point.as_int),
                attributes={kv.key: _value(kv.value) for kv in point.attributes},
            )
            for resource_metrics in request.resource_metrics
            for scope_metrics in resource_metrics.scope_metrics
            for metric in scope_metrics.metrics
            if metric.WhichOneof("data") == "sum"
            for point in metric.sum.data_points
        ]
        with self._changed:
            self.points.extend(received)
            self._changed.notify_all()

    def total(self, metric: str, **attributes: Any) -> float:
        """A counter's total over the points with these attributes: each process exports its cumulative sums again
        and again, so the latest point of each series (its start time and attributes) counts, once."""
        latest: dict[tuple[int, str], ReceivedPoint] = {}
        for point in self.points:
            if point.metric == metric and attributes.items() <= point.attributes.items():
                key = (point.start_ns, repr(sorted(point.attributes.items())))
                if key not in latest or point.time_ns >= latest[key].time_ns:
                    latest[key] = point
        return sum(point.value for point in latest.values())

    def wait_for_total(self, metric: str, expected: float, timeout: float, **attributes: Any) -> float:
        """Block until the counter's total (see `total`) is `expected` (bounded by `timeout`); returns the total."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while abs((found := self.total(metric, **attributes)) - expected) > 1e-9:
                left = deadline - time.monotonic()
                if left <= 0:
                    return found
                self._changed.wait(left)
            return found

    def of_scope(self, scope: str | None) -> list[ReceivedSpan]:
        """The spans of tracer `scope` and of the tracers named under it (`scope.*`); all spans for None."""
        return [s for s in self.spans if scope is None or s.scope == scope or s.scope.startswith(f"{scope}.")]

    def wait_for(self, count: int, timeout: float, scope: str | None = None) -> list[ReceivedSpan]:
        """Block until at least `count` spans (of `scope`, if given) arrived (bounded by `timeout`); returns all
        received so far (of that scope)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.of_scope(scope)) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    names = sorted(s.name for s in self.of_scope(scope))
                    raise TimeoutError(f"{len(names)} spans, not {count}, within {timeout}s: {names}")
                self._changed.wait(left)
            return self.of_scope(scope)
