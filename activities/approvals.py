"""Approval activities: record requests, apply a stored decision, expire what nobody decided in time.

The API stores a decision (conditionally: exactly one wins) and raises an event naming the approval; these
activities turn stored decisions into conversation messages and loop decisions, so the store, the conversation and
the run always agree, including when a decision races the timeout.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from agent_runs import run_status
from agent_runs.budget import PAYLOAD_BUDGET_BYTES, payload_size
from agent_runs.closing import expire_pending_approvals
from agent_runs.context import StepContext
from agent_runs.contracts import (
    ApprovalRequestsInput,
    ApprovalsRecorded,
    DecisionsInput,
    DecisionsResult,
    EscalateApprovalsInput,
    EscalateApprovalsResult,
    ExpireApprovalsInput,
    ExpireApprovalsResult,
    RunRef,
)
from agent_runs.store_log import OpenRunLog, RunClosedError
from agent_runtime.approvers import DEFAULT_APPROVERS, decider_keys, inbox_keys
from agent_runtime.conversation import approval_request_message_id, approval_response_message_id
from agent_runtime.loop_types import ApprovalDecision, RequestApproval
from agent_runtime.messages import FunctionApprovalResponseContent, FunctionCallContent
from agent_runtime.steps import record_approval_requests_step, record_approval_response_step
from agent_runtime.tools import Tool
from durable_steps import activity
from session_store import AlreadyDecidedError, ApprovalRecord
from telemetry.spans import emit_approval_span

NOT_APPROVED_IN_TIME = "Not approved in time."
# Headroom below the payload budget for one more decision (a reason is at most MAX_REASON_IN_RESULT characters).
DECISIONS_RESULT_BUDGET = PAYLOAD_BUDGET_BYTES - 2048
MAX_REASON_IN_RESULT = 200
REREAD_ATTEMPTS = 3
REREAD_DELAY_SECONDS = 0.5


@activity(compact=True)
async def record_approvals(step: ApprovalRequestsInput) -> ApprovalsRecorded:
    ctx = StepContext.for_run(step.run)
    run = await ctx.record()
    owner_id = run.owner_id if run is not None else None
    cached = ctx.cache_use(run, needs_calls=[call.call_id for call in step.calls])
    log = ctx.open_run_log(step.first_seq, len(step.calls), cached=cached)
    try:
        requests = await record_approval_requests_step(log, step.run.run_id, RequestApproval(calls=step.calls))
    except RunClosedError:
        # Abandoned by a cancel (hung past its grace period): the close answered the calls as not run, so no request
        # goes into its conversation and no approval is stored (nobody may decide one of a closed run; a close that
        # lands between two requests of a batch leaves the earlier ones without a record, equally undecidable).
        return ApprovalsRecorded(approval_ids=[])
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
    # One request per call, each id and seq fixed by its call: an earlier attempt wrote exactly these.
    await log.settle()
    marked = await run_status.mark(ctx.store, step.run.run_id, "requires_action", current=run)
    if marked is None:  # the run changed since it was read (or is marked already): it may have closed after the writes
        await _expire_if_closed(ctx, step.run)
    ctx.run_changed(run, marked)
    return ApprovalsRecorded(approval_ids=[request.id for request in requests])


async def _expire_if_closed(ctx: StepContext, run: RunRef) -> None:
    """A step abandoned by a cancel (hung past its grace period) after writing its requests stores their approvals
    after the run closed, and the close expired only what was pending then: expire them too, so no approval of a
    closed run stays pending (an inbox would offer it, and deciding it is refused)."""
    record = await ctx.store.get_run(run.run_id, session_id=run.session_id)
    if record is not None and record.finished:
        await expire_pending_approvals(ctx.store, run.run_id, record.status, session_id=run.session_id)


@activity(compact=True)
async def apply_decisions(step: DecisionsInput) -> DecisionsResult:
    ctx = StepContext.for_run(step.run)
    run = await ctx.record()  # the ETag the conversation cache is checked against, and the record to mark
    flagged = run.flagged_cancel_error if run is not None and not run.finished else None
    if flagged is not None:
        # A cancel the API accepted comes before any decision this finds: nothing approved runs after it (its event
        # may lag behind a decision's, or have been dropped at a continue-as-new).
        return DecisionsResult(cancelled=flagged["message"])
    stored = {
        record.approval_id: record
        for record in await ctx.store.list_approvals(run_id=step.run.run_id, session_id=step.run.session_id)
    }
    unconfirmed = [a for a in step.rung if (r := stored.get(a)) is None or r.status == "pending"]
    if unconfirmed:
        # The API stores a decision before ringing: give a lagging replica a moment, and only then report the bell
        # as one with no decision behind it.
        stored |= await _reread_pending(ctx, unconfirmed)
        unconfirmed = [a for a in unconfirmed if (r := stored.get(a)) is None or r.status == "pending"]
    result = DecisionsResult(unconfirmed=unconfirmed)
    for index, approval_id in enumerate(step.approval_ids):
        record = stored.get(approval_id)
        if record is None or record.status not in ("approved", "rejected"):
            continue  # still pending (or expired by a timeout step that lost to this one: it reports it itself)
        if payload_size(result) > DECISIONS_RESULT_BUDGET:
            result.more = True  # the rest are applied by the next call, at the same reserved seqs
            break
        # The request is in the run's settled part (`record_approvals`); a response an earlier attempt stored is
        # read by its id.
        cached = ctx.cache_use(
            run,
            needs_ids=[approval_request_message_id(step.run.run_id, record.call_id)],
            probe_ids=[approval_response_message_id(step.run.run_id, record.call_id)],
        )
        log = ctx.open_run_log(step.first_seq + index, 1, cached=cached)
        try:
            result.decided.append(await _record_response(ctx, log, record))
        except RunClosedError:  # abandoned by a cancel (see `_record_response`): nobody waits for the rest
            return result
        await log.settle()
        _approval_span(step.run, record)
    # `stored` holds every approval of the run, as read (or re-read) in this step. The mark is conditioned on the
    # run's ETag as read at the start: a run closed since keeps its final status.
    pending = any(record.status == "pending" for record in stored.values())
    marked = await run_status.mark_unless_pending(
        ctx.store, step.run.run_id, session_id=step.run.session_id, pending=pending, current=run
    )
    ctx.run_changed(run, marked)
    return result


async def _reread_pending(ctx: StepContext, approval_ids: list[str]) -> dict[str, ApprovalRecord]:
    found: dict[str, ApprovalRecord] = {}
    for attempt in range(REREAD_ATTEMPTS):
        for approval_id in approval_ids:
            record = await ctx.store.get_approval(approval_id, session_id=ctx.run.session_id)
            if record is not None and record.status != "pending":
                found[approval_id] = record
        if len(found) == len(approval_ids) or attempt == REREAD_ATTEMPTS - 1:
            return found
        await asyncio.sleep(REREAD_DELAY_SECONDS)
    return found


@activity(compact=True)
async def expire_approvals(step: ExpireApprovalsInput) -> ExpireApprovalsResult:
    """Expire, in the store, what is still pending there, and write each expiry into the conversation. An approval
    decided in the store meanwhile is left for `apply_decisions`: the run applies it like any decision."""
    ctx = StepContext.for_run(step.run)
    result = ExpireApprovalsResult()
    for index, approval_id in enumerate(step.approval_ids):
        # Not checked against the run: the store takes one decision per approval, and a run's close expires what is
        # pending, so an abandoned step's expiry (or the close's, whichever lands first) leaves it expired either way.
        try:
            record = await ctx.store.decide_approval(
                approval_id, "expired", reason=NOT_APPROVED_IN_TIME, decided_at=datetime.now(UTC)
            )
        except AlreadyDecidedError as race:
            record = race.current
        if record.status == "expired":
            try:
                await _record_response(ctx, ctx.open_run_log(step.first_seq + index, 1), record)
            except RunClosedError:  # abandoned by a cancel (see `_record_response`): nobody waits for the rest
                return result
            _approval_span(step.run, record)
            result.expired.append(approval_id)
    # (`mark` reads the run: a finished run keeps its status.)
    await run_status.mark_unless_pending(ctx.store, step.run.run_id, session_id=step.run.session_id)
    return result


@activity(compact=True)
async def escalate_approvals(step: EscalateApprovalsInput) -> EscalateApprovalsResult:
    """Hand what is still pending in the store to the escalation's approver with the new deadline. An approval decided
    in the store meanwhile is left for `apply_decisions`, as after an expiry."""
    ctx = StepContext.for_run(step.run)
    result = EscalateApprovalsResult()
    to_keys = decider_keys([step.to], None)  # a role or an id ("owner" needs none: the owner's key is there)
    for approval_id in step.approval_ids:
        try:
            await ctx.store.escalate_approval(approval_id, step.to, expires_at=step.expires_at, to_keys=to_keys)
        except AlreadyDecidedError:
            continue
        result.escalated.append(approval_id)
    return result


async def _record_response(ctx: StepContext, log: OpenRunLog, record: ApprovalRecord) -> ApprovalDecision:
    """Write the decision into the conversation (seed 002's approval response) and return it for the loop. Raises
    `RunClosedError` when the run has closed: a step abandoned by a cancel (hung past its grace period) must not
    append a decision to a conversation the close already ended (it answered the call as not run)."""
    approved = record.status == "approved"
    arguments = record.edited_arguments if approved and record.edited_arguments is not None else record.arguments
    response = FunctionApprovalResponseContent(
        id=record.approval_id,
        approved=approved,
        function_call=FunctionCallContent(call_id=record.call_id, name=record.tool, arguments=arguments),
        reason=record.reason,
    )
    decision = await record_approval_response_step(
        await ctx.run_agent(), log, ctx.run.run_id, response, decided_by=record.decided_by, decided_at=record.decided_at
    )
    # The loop only needs the gist of a reason (the denied call's result); the full text is stored with the decision.
    if decision.reason is not None and len(decision.reason) > MAX_REASON_IN_RESULT:
        decision = decision.model_copy(update={"reason": decision.reason[: MAX_REASON_IN_RESULT - 1] + "…"})
    return decision


def _approval_span(run: RunRef, record: ApprovalRecord) -> None:
    """The wait for this decision as an `await_approval` span of the run (request to decision) and its latency."""
    emit_approval_span(
        run.trace,
        run_id=run.run_id,
        agent=run.agent,
        tool=record.tool,
        call_id=record.call_id,
        approval_id=record.approval_id,
        decision=record.status,
        decided_by=record.decided_by,
        requested_at=record.created_at,
        decided_at=record.decided_at,
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
