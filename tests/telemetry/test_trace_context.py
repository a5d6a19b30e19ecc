"""`RunTrace`: the W3C trace context a run carries, and the ids derived from run ids."""

from __future__ import annotations

from datetime import UTC, datetime

from telemetry.trace_context import RunTrace, run_span_id
from telemetry.workflow_spans import child_run_trace, step_span_id

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_the_callers_traceparent_becomes_the_run_spans_parent() -> None:
    trace = RunTrace.start({"Traceparent": f"00-{TRACE}-00f067aa0ba902b7-01", "tracestate": "vendor=1"}, now=NOW)
    assert (trace.trace_id, trace.parent_span_id, trace.sampled, trace.tracestate) == (
        TRACE, "00f067aa0ba902b7", True, "vendor=1"
    )
    assert trace.started_at == NOW
    assert trace.traceparent("run-1") == f"00-{TRACE}-{run_span_id('run-1'):016x}-01"
    assert RunTrace.start({"traceparent": f"00-{TRACE}-00f067aa0ba902b7-00"}).sampled is False


def test_without_a_caller_the_run_starts_a_new_trace() -> None:
    first, second = RunTrace.start({}), RunTrace.start({"traceparent": "garbage"})
    assert first.parent_span_id is None and second.parent_span_id is None
    assert first.trace_id != second.trace_id and len(first.trace_id) == 32


def test_headers_sent_twice_as_the_functions_host_joins_them() -> None:
    """Two `traceparent`s, comma-joined, are no traceparent: a new trace. Two `tracestate`s joined are one list."""
    twice = f"00-{TRACE}-00f067aa0ba902b7-01,00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
    joined = RunTrace.start({"traceparent": twice})
    assert joined.parent_span_id is None and joined.trace_id != TRACE
    both = RunTrace.start({"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01", "tracestate": "a=1,b=2"})
    assert both.tracestate == "a=1,b=2"


def test_an_oversized_tracestate_is_dropped_not_refused() -> None:
    trace = RunTrace.start({"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01", "tracestate": ",".join(
        f"v{i}={'x' * 200}" for i in range(20)
    )})
    assert trace.trace_id == TRACE and trace.tracestate is None


def test_span_ids_are_derived_stably_and_differ_per_run_and_step() -> None:
    assert run_span_id("run-1") == run_span_id("run-1") != run_span_id("run-2")
    assert 0 < run_span_id("run-1") < 2**64
    assert step_span_id("wf", "write") != step_span_id("wf", "review")
    workflow = RunTrace.start({}, now=NOW)
    child = child_run_trace(workflow, "wf", "write")
    assert child is not None and child.trace_id == workflow.trace_id
    assert child.parent_span_id == f"{step_span_id('wf', 'write'):016x}"
    assert child_run_trace(None, "wf", "write") is None
    assert RunTrace.model_validate_json(child.model_dump_json()) == child  # rides in payloads as JSON
