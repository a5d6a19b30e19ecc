"""Approval gates of workflows: open a request (an ordinary approval record of the workflow run, decided through
`POST /api/runs/{workflow_run_id}/approvals/{approval_id}`), expire it on timeout, record the outcome."""

from __future__ import annotations

from datetime import UTC, datetime

from agent_runs import run_status
from agent_runs.finishing import closed_as
from agent_runtime.approvers import DEFAULT_APPROVERS, inbox_keys
from durable_steps import activity
from session_store import WORKFLOW_GATE_TOOL_PREFIX, AlreadyDecidedError, ApprovalRecord
from workflow_runtime.contracts import GateExpiry, GateOpened, GateRecord, GateRequest, StepResult
from workflow_runtime.definition import ApprovalStep, Escalate
from workflow_runtime.journal import WorkflowContext
from workflow_runtime.references import UnresolvedReference, render


def gate_approval_id(workflow_run_id: str, key: str, level: int) -> str:
    return f"{workflow_run_id}.{key}.{'escalation' if level else 'approval'}"


@activity()
async def workflow_open_gate(request: GateRequest) -> GateOpened:
    ctx = WorkflowContext.for_ref(request.ref)
    step = ctx.definition.step_as(request.step_id, ApprovalStep)
    run = await ctx.record()  # one read serves the message's input and the owner (neither ever changes)
    approval_id = gate_approval_id(request.ref.run_id, request.key, request.level)
    ended = closed_as(run)  # given up by its start after the orchestration's first read: nobody is asked
    if ended is not None:
        return GateOpened(approval_id=approval_id, expires_at=request.expires_at, ended=ended)
    try:
        message = render(step.message, await ctx.data(request.refs, run))
    except UnresolvedReference as error:
        message = f"{step.message}\n\n(unresolved: {error})"
    escalated = request.level > 0
    approver = step.on_timeout.to if escalated and isinstance(step.on_timeout, Escalate) else step.approver
    owner_id = run.owner_id
    approvers = [approver] if approver else list(DEFAULT_APPROVERS)  # a role ("role:<role>") or a principal id
    await ctx.store.put_approvals(
        [
            ApprovalRecord(
                approval_id=approval_id,
                run_id=request.ref.run_id,
                session_id=request.ref.control_session,
                call_id=f"{request.key}.{request.level}",
                tool=f"{WORKFLOW_GATE_TOOL_PREFIX}{step.id}",
                arguments={"step": step.id, "message": message, "approver": approver, "escalated": escalated},
                expires_at=request.expires_at,
                owner_id=owner_id,
                approvers=approvers,
                decider_keys=inbox_keys(approvers, owner_id),
            )
        ]
    )
    # Read again, fresh (best effort against a change since), in the run's control session: no lookup read.
    await run_status.mark(ctx.store, request.ref.run_id, "requires_action", session_id=request.ref.control_session)
    return GateOpened(approval_id=approval_id, expires_at=request.expires_at)


@activity()
async def workflow_expire_gate(request: GateRecord) -> GateExpiry:
    """The gate's timer fired: expire the request, unless a decision won the race (then that decision stands)."""
    ctx = WorkflowContext.for_ref(request.ref)
    try:
        record = await ctx.store.decide_approval(
            request.approval_id, "expired", reason="No decision in time.", decided_at=request.at or datetime.now(UTC)
        )
    except AlreadyDecidedError as race:
        record = race.current
    return GateExpiry(status=record.status)


@activity()
async def workflow_record_gate(request: GateRecord) -> StepResult:
    ctx = WorkflowContext.for_ref(request.ref)
    step = ctx.definition.step_as(request.step_id, ApprovalStep)
    # A gate's approval, like the workflow's run, is in its control session (`workflow_open_gate`): no lookup read.
    record = await ctx.store.get_approval(request.approval_id, session_id=request.ref.control_session)
    if record is None or record.status == "pending":
        raise RuntimeError(f"approval {request.approval_id!r} has no decision yet")  # retried by Durable
    escalated = request.level > 0
    await run_status.mark_unless_pending(ctx.store, request.ref.run_id, session_id=request.ref.control_session)
    if record.status == "expired":
        action = step.on_timeout.then if isinstance(step.on_timeout, Escalate) else step.on_timeout
        if action == "fail":
            error = f"no decision on '{step.id}' before its timeout" + (" (escalated)" if escalated else "")
            await ctx.journal(request, "approval", status="failed", error=error, started_at=record.created_at)
            return StepResult(step_id=step.id, status="failed", error=error)
        approved, decided_by, reason = action == "approve", None, f"timed out: default action '{action}'"
    else:
        approved, decided_by, reason = record.status == "approved", record.decided_by, record.reason
    output = {
        "approved": approved,
        "decided_by": decided_by,
        "reason": reason,
        "escalated": escalated,
        "timed_out": record.status == "expired",
        "approval_id": record.approval_id,
    }
    await ctx.journal(request, "approval", output=output, started_at=record.created_at)
    return StepResult(step_id=step.id, status="ok", approved=approved, cancel_requested=await ctx.cancel_requested())
