"""Spans of workflows: `workflow {name}` for the whole workflow run (emitted by `workflow_finish`) and
`workflow_step {step}` per finished step (emitted when the step's journal entry is written). Both have ids derived
from the workflow run id (and the step's key), so the agent runs a step starts are parented under their step span
before it is emitted: a workflow is one trace, its agent runs included."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from telemetry.spans import emit_fixed_span
from telemetry.trace_context import RunTrace, run_span_id


def step_span_id(workflow_run_id: str, key: str) -> int:
    digest = hashlib.sha256(f"workflow_step:{workflow_run_id}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


def child_run_trace(workflow_trace: RunTrace | None, workflow_run_id: str, key: str) -> RunTrace | None:
    """The trace of an agent run a step starts: the workflow's trace, under the step's span."""
    if workflow_trace is None:
        return None
    return workflow_trace.model_copy(
        update={"parent_span_id": f"{step_span_id(workflow_run_id, key):016x}", "started_at": datetime.now(UTC)}
    )


def emit_step_span(
    workflow_trace: RunTrace | None,
    *,
    workflow: str,
    workflow_run_id: str,
    key: str,
    step_id: str,
    kind: str,
    status: str,
    error: str | None,
    started_at: datetime,
) -> None:
    if workflow_trace is None:
        return
    emit_fixed_span(
        workflow_trace,
        f"workflow_step {step_id}",
        span_id=step_span_id(workflow_run_id, key),
        parent=workflow_trace.run_span_context(workflow_run_id),
        attributes={
            "workflow.name": workflow,
            "workflow.run.id": workflow_run_id,
            "workflow.step.id": step_id,
            "workflow.step.key": key,
            "workflow.step.kind": kind,
            "workflow.step.status": status,
        },
        started_at=started_at,
        ended_at=datetime.now(UTC),
        error=error if status == "failed" else None,
    )


def emit_workflow_span(
    workflow_trace: RunTrace | None, *, workflow: str, workflow_run_id: str, status: str, reason: str
) -> None:
    if workflow_trace is None:
        return
    emit_fixed_span(
        workflow_trace,
        f"workflow {workflow}",
        span_id=run_span_id(workflow_run_id),
        parent=workflow_trace.parent_span_context(),
        attributes={
            "workflow.name": workflow,
            "workflow.run.id": workflow_run_id,
            "workflow.status": status,
            "workflow.reason": reason[:256],
        },
        started_at=workflow_trace.started_at,
        ended_at=datetime.now(UTC),
        error=reason if status == "failed" else None,
    )
