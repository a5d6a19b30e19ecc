"""The spans of an agent run (OpenTelemetry GenAI semantic conventions), emitted from activities only.

- `invoke_agent {agent}`: the whole run, from the start request to `finish_run` (emitted there, with the run's start
  time and the span id derived from the run id, so the steps below could name it as their parent all along);
- `chat {model}`: one model call (`telemetry.model_client.TracedModelClient`);
- `execute_tool {tool}`: one tool call;
- `await_approval {tool}`: from an approval request to its decision (emitted when the decision is applied).

Every activity runs its work inside `run_step(trace, run_id)`, which makes the run span the current parent.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanContext, SpanKind, Status, StatusCode

from agent_runtime.messages import Usage
from telemetry import metrics
from telemetry.trace_context import RunTrace, non_recording, run_span_id

TRACER_NAME = "durable_agents"
_tracer = trace.get_tracer(TRACER_NAME)


def tracer() -> trace.Tracer:
    return _tracer


def tracing() -> bool:
    """Whether spans go anywhere: a tracer provider is installed. The API's own providers (its proxy, until one is
    installed, and its no-op) record nothing, so no span, parent context or attributes are built for them. Asked on
    each use: a provider may be installed later."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider)


@contextmanager
def run_step(run_trace: RunTrace | None, run_id: str) -> Iterator[None]:
    """Spans started inside belong to the run: their parent is the run's `invoke_agent` span."""
    if run_trace is None or not tracing():
        yield
        return
    parent = trace.set_span_in_context(non_recording(run_trace.run_span_context(run_id)))
    token = otel_context.attach(parent)
    try:
        yield
    finally:
        otel_context.detach(token)


@contextmanager
def tool_span(agent: str, tool: str, call_id: str) -> Iterator[Span]:
    """`execute_tool {tool}`; the caller marks a failed call with `mark_error`."""
    started = time.perf_counter()
    if not tracing():
        try:
            yield trace.INVALID_SPAN  # records nothing, as the no-op tracer's span would
        finally:
            metrics.record_tool_call(agent=agent, tool=tool, seconds=time.perf_counter() - started)
        return
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "gen_ai.agent.name": agent,
    }
    with _tracer.start_as_current_span(f"execute_tool {tool}", kind=SpanKind.INTERNAL, attributes=attributes) as span:
        try:
            yield span
        finally:
            metrics.record_tool_call(agent=agent, tool=tool, seconds=time.perf_counter() - started)


def mark_error(span: Span, error_type: str, description: str | None = None) -> None:
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, description))


def emit_run_span(
    run_trace: RunTrace | None,
    *,
    run_id: str,
    session_id: str,
    agent: str,
    status: str,
    reason: str,
    usage: Usage,
    ended_at: datetime | None = None,
) -> None:
    """The run's `invoke_agent` span, from its start to now, with the id its steps already use as their parent.
    Also records the run's metrics. Emitted by `finish_run` (at least once: a retried finish emits the same span)."""
    ended_at = ended_at or datetime.now(UTC)
    seconds = (ended_at - run_trace.started_at).total_seconds() if run_trace else 0.0
    metrics.record_run(agent=agent, status=status, reason=reason, seconds=seconds)
    if run_trace is None or not tracing():
        return
    attributes: dict[str, str | int | float] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "gen_ai.conversation.id": session_id,
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "agent_run.id": run_id,
        "agent_run.status": status,
        "agent_run.finish_reason": reason[:256],
    }
    if usage.cost is not None:
        attributes["agent_run.cost"] = usage.cost
    emit_fixed_span(
        run_trace,
        f"invoke_agent {agent}",
        span_id=run_span_id(run_id),
        parent=run_trace.parent_span_context(),
        attributes=attributes,
        started_at=run_trace.started_at,
        ended_at=ended_at,
        error=reason if status == "failed" else None,
    )


def emit_fixed_span(
    run_trace: RunTrace,
    name: str,
    *,
    span_id: int,
    parent: SpanContext | None,
    attributes: dict[str, str | int | float],
    started_at: datetime,
    ended_at: datetime,
    error: str | None = None,
) -> None:
    """A span that covers work across activities, with an id fixed in advance (so spans emitted before it could
    name it as their parent), emitted at once when that work is over."""
    from telemetry.ids import fixed_ids, run_span_tracer  # the OpenTelemetry SDK: out of start-up (cold start)

    run_tracer = run_span_tracer(f"{TRACER_NAME}.runs")
    if run_tracer is None:
        return
    parent_context = trace.set_span_in_context(non_recording(parent)) if parent else otel_context.Context()
    with fixed_ids(run_trace.trace_id_int, span_id):
        span = run_tracer.start_span(
            name,
            context=parent_context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=_ns(min(started_at, ended_at)),
        )
    if error is not None:
        mark_error(span, error.split(":", 1)[0][:64] or "failed", error[:256])
    span.end(end_time=_ns(ended_at))


def emit_approval_span(
    run_trace: RunTrace | None,
    *,
    run_id: str,
    agent: str,
    tool: str,
    call_id: str,
    approval_id: str,
    decision: str,
    decided_by: str | None,
    requested_at: datetime | None,
    decided_at: datetime | None,
) -> None:
    """`await_approval {tool}`: from the request to the decision (`approved`, `rejected`, `expired`)."""
    decided_at = decided_at or datetime.now(UTC)
    requested_at = requested_at or decided_at
    metrics.record_approval(
        agent=agent, tool=tool, decision=decision, seconds=(decided_at - requested_at).total_seconds()
    )
    if run_trace is None or not tracing():
        return
    attributes = {
        "gen_ai.operation.name": "await_approval",
        "gen_ai.agent.name": agent,
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call_id,
        "agent_run.approval.id": approval_id,
        "agent_run.approval.decision": decision,
    }
    if decided_by:
        attributes["agent_run.approval.decided_by"] = decided_by
    with run_step(run_trace, run_id):
        span = _tracer.start_span(
            f"await_approval {tool}", kind=SpanKind.INTERNAL, attributes=attributes, start_time=_ns(requested_at)
        )
        span.end(end_time=_ns(decided_at))


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)
