"""An `IdGenerator` that lets one span be created with ids fixed in advance (the run span, see `trace_context`).

The SDK creates span ids inside `Tracer.start_span`; this generator returns the ids set by `fixed_ids` for exactly
that one call and delegates to the SDK's random generator otherwise. Only the tracer of run spans uses it
(`run_span_tracer`), whichever SDK provider is installed (ours, a test's, Azure Monitor's).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from opentelemetry import trace
from opentelemetry.sdk.trace import Tracer, TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

_fixed: ContextVar[tuple[int, int] | None] = ContextVar("telemetry_fixed_ids", default=None)


class RunSpanIds(IdGenerator):
    def __init__(self, fallback: IdGenerator | None = None) -> None:
        self._fallback = fallback or RandomIdGenerator()

    def generate_span_id(self) -> int:
        fixed = _fixed.get()
        return fixed[1] if fixed is not None else self._fallback.generate_span_id()

    def generate_trace_id(self) -> int:
        fixed = _fixed.get()
        return fixed[0] if fixed is not None else self._fallback.generate_trace_id()


@contextmanager
def fixed_ids(trace_id: int, span_id: int) -> Iterator[None]:
    """Wrap exactly one `start_span` call: that span gets these ids."""
    token = _fixed.set((trace_id, span_id))
    try:
        yield
    finally:
        _fixed.reset(token)


def run_span_tracer(name: str) -> trace.Tracer | None:
    """The SDK tracer that creates run spans, its id generator honouring `fixed_ids` (a generator of its own: the
    provider's, and its other tracers, are left alone). None when tracing is not the SDK's (nothing is recorded)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        return None
    tracer = provider.get_tracer(name)
    if not isinstance(tracer, Tracer):
        return None  # a disabled provider hands out no-op tracers
    if not isinstance(tracer.id_generator, RunSpanIds):  # the SDK caches tracers: this happens once per process
        tracer.id_generator = RunSpanIds(tracer.id_generator)
    return tracer
