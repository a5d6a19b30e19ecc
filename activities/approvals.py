"""Approval activities: record requests, apply a stored decision, expire what nobody decided in time.

The API stores a decision (conditionally: exactly one wins) and raises an event naming the approval; these
activities turn stored decisions into conversation messages and loop decisions, so the store, the conversation and
the run always agree, including when a decision races the timeout.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agent_runs import run_status
from agent_runs.budget import within_budget
from agent_runs.context import StepContext
from agent_runs.contracts import ApprovalRequestsInput, DecisionInput, ExpireApprovalsInput, ExpireApprovalsResult
from agent_runs.store_log import StoreConversationLog
from agent_runtime.approvers import DEFAULT_APPROVERS, inbox_keys
from agent_runtime.loop_types import ApprovalDecision, RequestApproval
from agent_runtime.messages import FunctionApprovalResponseContent, FunctionCallContent
from agent_runtime.steps import record_approval_requests_step, record_approval_response_step
from agent_runtime.tools import Tool
from session_store import AlreadyDecidedError, ApprovalRecord

NOT_APPROVED_IN_TIME = "Not approved in time."


async def record_approvals(payload: dict[str, Any]) -> dict[str, Any]:
    step = ApprovalRequestsInput.model_validate(payload)
    ctx = StepContext.for_run(step.run)
    requests = await record_approval_requests_step(
        ctx.run_log(step.first_seq, len(step.calls)), step.run.run_id, RequestApproval(calls=step.calls)
    )
    run = await ctx.store.get_run(step.run.run_id)
    owner_id = run.owner_id if run is not None else None
    await ctx.store.put_approvals(
        [
            ApprovalRecord(
                approval_id=request.id,
                run_id=step.run.run_id,
                session_id=step.run.session_id,
                call_id=request.function_call.call_id,
                tool=request.function_call.name,
                arguments=_arguments_object(request.function_call),
                expires_at=step.expires_at,
                **approver_fields(ctx.agent.tool(request.function_call.name), owner_id),
            )
            for request in requests
        ]
    )
    await run_status.mark(ctx.store, step.run.run_id, "requires_action")
    return {"approval_ids": [request.id for request in requests]}


async def apply_decision(payload: dict[str, Any]) -> dict[str, Any]:
    step = DecisionInput.model_validate(payload)
    ctx = StepContext.for_run(step.run)
    record = await ctx.store.get_approval(step.approval_id)
    if record is None or record.status == "pending":
        raise RuntimeError(f"approval {step.approval_id!r} has no stored decision yet")  # retried by Durable
    decision = await _record_response(ctx, ctx.run_log(step.seq, 1), record)
    await run_status.mark_unless_pending(ctx.store, step.run.run_id)
    return within_budget(decision.model_dump(mode="json"), "decision")


async def expire_approvals(payload: dict[str, Any]) -> dict[str, Any]:
    step = ExpireApprovalsInput.model_validate(payload)
    ctx = StepContext.for_run(step.run)
    log = ctx.run_log(step.first_seq, len(step.approval_ids))
    result = ExpireApprovalsResult()
    for approval_id in step.approval_ids:
        try:
            record = await ctx.store.decide_approval(
                approval_id, "expired", reason=NOT_APPROVED_IN_TIME, decided_at=datetime.now(UTC)
            )
        except AlreadyDecidedError as race:
            record = race.current
        decision = await _record_response(ctx, log, record)
        if record.status == "expired":
            result.expired.append(approval_id)
        else:
            result.decided.append(decision)
    await run_status.mark_unless_pending(ctx.store, step.run.run_id)
    return within_budget(result.model_dump(mode="json"), "expire result")


async def _record_response(ctx: StepContext, log: StoreConversationLog, record: ApprovalRecord) -> ApprovalDecision:
    """Write the decision into the conversation (seed 002's approval response) and return it for the loop."""
    approved = record.status == "approved"
    arguments = record.edited_arguments if approved and record.edited_arguments is not None else record.arguments
    response = FunctionApprovalResponseContent(
        id=record.approval_id,
        approved=approved,
        function_call=FunctionCallContent(call_id=record.call_id, name=record.tool, arguments=arguments),
        reason=record.reason,
    )
    return await record_approval_response_step(
        ctx.agent, log, ctx.run.run_id, response, decided_by=record.decided_by, decided_at=record.decided_at
    )


def approver_fields(tool: Tool | None, owner_id: str | None) -> dict[str, Any]:
    """Who may decide a call of `tool` (its `approvers` and `separation_of_duties`), stored on the approval record
    with the keys an approver's inbox is queried by."""
    approvers = list(tool.approvers) if tool is not None else list(DEFAULT_APPROVERS)
    return {
        "owner_id": owner_id,
        "approvers": approvers,
        "separation_of_duties": tool.separation_of_duties if tool is not None else False,
        "decider_keys": inbox_keys(approvers, owner_id),
    }


def _arguments_object(call: FunctionCallContent) -> dict[str, Any]:
    try:
        return call.parse_arguments()
    except ValueError:
        return {"raw_arguments": call.arguments}  # malformed JSON from the model: keep it visible to the approver
