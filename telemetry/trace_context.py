"""`RunTrace`: the trace a run belongs to, carried in the run's orchestration input (`RunRef.trace`).

A durable run lives in many activities, processes and days. Its spans share one trace because every activity parents
them under the run's `invoke_agent` span, whose span id is derived from the run id (`run_span_id`): children can
name their parent long before it is emitted (by `finish_run`, with the run's start time) and every process derives
the same id. The W3C trace context of the HTTP request that started the run (`traceparent`), when there is one,
becomes the parent of the run span, so a client's own trace continues into the run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from pydantic import BaseModel, ConfigDict, Field

_HEX32 = r"^[0-9a-f]{32}$"
_HEX16 = r"^[0-9a-f]{16}$"
_MAX_TRACESTATE = 512
_propagator = TraceContextTextMapPropagator()


class RunTrace(BaseModel):
    """Small on purpose (it rides in every activity payload): ids as hex, the start time of the run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trace_id: str = Field(pattern=_HEX32)
    parent_span_id: str | None = Field(default=None, pattern=_HEX16, description="the span that started the run")
    sampled: bool = True
    tracestate: str | None = Field(default=None, max_length=_MAX_TRACESTATE)
    started_at: datetime

    @classmethod
    def start(cls, headers: Mapping[str, str] | None = None, *, now: datetime | None = None) -> RunTrace:
        """The trace of a run starting now: the caller's (W3C `traceparent`/`tracestate` headers, else the span
        current in this process), or a new trace with the run span as its root."""
        started_at = now or datetime.now(UTC)
        carrier = {k.lower(): v for k, v in (headers or {}).items()}
        parent = trace.get_current_span(_propagator.extract(carrier)).get_span_context()
        if not parent.is_valid:
            parent = trace.get_current_span().get_span_context()
        if not parent.is_valid:
            from opentelemetry.sdk.trace.id_generator import RandomIdGenerator  # the SDK: not at start-up

            return cls(trace_id=f"{RandomIdGenerator().generate_trace_id():032x}", started_at=started_at)
        state = parent.trace_state.to_header() if parent.trace_state else None
        if state and len(state) > _MAX_TRACESTATE:
            state = None  # vendor data too large to carry in every payload: the trace itself continues
        return cls(
            trace_id=f"{parent.trace_id:032x}",
            parent_span_id=f"{parent.span_id:016x}",
            sampled=parent.trace_flags.sampled,
            tracestate=state or None,
            started_at=started_at,
        )

    @property
    def trace_id_int(self) -> int:
        return int(self.trace_id, 16)

    def flags(self) -> TraceFlags:
        return TraceFlags(TraceFlags.SAMPLED if self.sampled else TraceFlags.DEFAULT)

    def trace_state(self) -> TraceState:
        return TraceState.from_header([self.tracestate]) if self.tracestate else TraceState()

    def run_span_context(self, run_id: str) -> SpanContext:
        """The context of the run's `invoke_agent` span (emitted at the end, referenced by every step before)."""
        return SpanContext(
            self.trace_id_int,
            run_span_id(run_id),
            is_remote=True,
            trace_flags=self.flags(),
            trace_state=self.trace_state(),
        )

    def parent_span_context(self) -> SpanContext | None:
        """The span that started the run (the run span's parent), None when the run span is a root."""
        if self.parent_span_id is None:
            return None
        return SpanContext(
            self.trace_id_int,
            int(self.parent_span_id, 16),
            is_remote=True,
            trace_flags=self.flags(),
            trace_state=self.trace_state(),
        )

    def traceparent(self, run_id: str) -> str:
        """The W3C `traceparent` of the run span: hand it to anything the run calls out to."""
        return f"00-{self.trace_id}-{run_span_id(run_id):016x}-{'01' if self.sampled else '00'}"


def run_span_id(run_id: str) -> int:
    """The `invoke_agent` span id of a run: derived from the run id, so every process and every retry agrees."""
    digest = hashlib.sha256(f"invoke_agent:{run_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


def non_recording(span_context: SpanContext) -> NonRecordingSpan:
    return NonRecordingSpan(span_context)
