"""`workflow_finish`: close the workflow's run record with its output (resolved from the journal) or its error;
`workflow_closed_before`: how a workflow closed before its orchestration started ended (its record says)."""

from __future__ import annotations

from typing import Any

from agent_runs.closing import expire_pending_approvals
from agent_runs.contracts import FinishResult
from agent_runs.finishing import closed_as
from durable_steps import activity
from session_store import RunRecord
from telemetry.workflow_spans import emit_workflow_span
from workflow_runtime.contracts import FinishRequest, WorkflowClosed, WorkflowRef
from workflow_runtime.journal import WorkflowContext
from workflow_runtime.references import UnresolvedReference, resolve


@activity()
async def workflow_finish(request: FinishRequest) -> WorkflowClosed:
    """Close the record as the driver asks; returns how the store closed it when that differs (`WorkflowClosed`)."""
    ctx = WorkflowContext.for_ref(request.ref)
    # One read serves the output's input and the finish: its ETag conditions the finish's write, so a record changed
    # since (a cancel flagged meanwhile) is read again by the store, never overwritten.
    record = await ctx.record()
    output: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    if request.status == "completed":
        output = await _output(ctx, request, record)
    else:
        code = request.code or ("step_failed" if request.failed_step else request.status)
        error = {"code": code, "message": request.reason, "step": request.failed_step}
    stored = await ctx.store.finish_run(request.ref.run_id, request.status, output=output, error=error, current=record)
    # A cancel flagged after the last step read the flag, or before a step failed: the store closed it `cancelled`
    # (`rules.finish`), or it was closed before (the store keeps the first finish). It ended as the store says.
    ended = None if (stored.status, stored.error) == (request.status, error) else closed_as(stored)
    status, reason = (ended.status, ended.reason) if ended is not None else (request.status, request.reason)
    await expire_pending_approvals(ctx.store, request.ref.run_id, status, what="workflow", session_id=record.session_id)
    emit_workflow_span(
        request.ref.trace, workflow=request.ref.workflow, workflow_run_id=request.ref.run_id, status=status,
        reason=reason,
    )
    return WorkflowClosed(ended=ended)


@activity()
async def workflow_closed_before(ref: WorkflowRef) -> FinishResult | None:
    """How the workflow ended if its record is closed already, before its first step (None: it is open). A start
    whose orchestration call failed or timed out gives the workflow up (`start_failed`) and answers 5xx, so the caller
    may start another; should the host have taken that start all the same, its orchestration must run nothing."""
    return closed_as(await WorkflowContext.for_ref(ref).record())


async def _output(ctx: WorkflowContext, request: FinishRequest, record: RunRecord) -> dict[str, Any]:
    data = await ctx.data(request.refs, record)
    declared = ctx.definition.output
    if not declared:
        return {"result": data["steps"].get(request.last_step) if request.last_step else None}
    output: dict[str, Any] = {}
    for name, ref in declared.items():
        try:
            output[name] = resolve(ref, data)
        except UnresolvedReference:
            output[name] = None  # e.g. a step on a branch that did not run
    return output
