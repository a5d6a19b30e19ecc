"""Approvals over HTTP: list a run's approvals, decide one (approve / reject / approve with edited arguments).

The decision is validated (edited arguments against the tool's schema), stored conditionally (exactly one decision
wins, with who and when for the audit trail) and only then announced to the run by an event naming the approval.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import azure.durable_functions as df
import azure.functions as func
from pydantic import BaseModel, Field

from agent_runs.run_tools import agent_for_run
from agent_runs.services import RunServices
from agent_runtime.check_threads import check_off_loop
from agent_runtime.messages import FunctionApprovalRequestContent, FunctionCallContent
from agent_runtime.steps import decide_approval
from agent_runtime.tools import ToolArgumentsError
from http_api.access import (
    Decidable,
    Editable,
    approval_rights,
    decidable_approval,
    edit_refusal,
    is_open,
    owns,
    visible_approvals,
)
from http_api.adapter import http_endpoint, json_response, query_model, read_json_body
from http_api.caller import current_principal
from http_api.decision_delivery import deliver
from http_api.durable_gateway import DurableGateway
from http_api.models import ApprovalDecisionRequest
from http_api.problems import ApiProblem
from http_api.runs import agent_or_404
from session_store import AlreadyDecidedError, ApprovalRecord, RunRecord


class ApprovalView(BaseModel):
    approval_id: str
    run_id: str
    call_id: str
    tool: str
    arguments: dict[str, object]
    status: str
    created_at: datetime | None
    expires_at: datetime | None
    decided_at: datetime | None
    decided_by: str | None
    decided_by_name: str | None = None
    reason: str | None
    edited_arguments: dict[str, object] | None
    escalated_to: str | None = None
    escalated_at: datetime | None = None
    approvers: list[str] = Field(default_factory=lambda: ["owner"], description="who may decide")
    separation_of_duties: bool = False
    decidable: Decidable = False
    editable: Editable = False

    @classmethod
    def of(cls, record: ApprovalRecord, run: RunRecord) -> ApprovalView:
        """The approval of `run` as the caller sees it, with what they may do with it."""
        rights = approval_rights(current_principal(), record, run, now=datetime.now(UTC))
        return cls.model_validate(
            record.model_dump(exclude={"session_id", "etag", "owner_id", "decider_keys"}) | rights._asdict()
        )


class ApprovalsQuery(BaseModel):
    status: Literal["pending", "approved", "rejected", "expired"] | None = None


@http_endpoint
async def list_approvals(req: func.HttpRequest) -> func.HttpResponse:
    store = RunServices.current().store
    query = query_model(req, ApprovalsQuery)
    run, records = await visible_approvals(store, req.route_params["run_id"], status=query.status)
    return json_response(
        {"run_id": run.run_id, "approvals": [ApprovalView.of(r, run).model_dump(mode="json") for r in records]}
    )


@http_endpoint
async def decide(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    services = RunServices.current()
    run, record = await decidable_approval(
        services.store, req.route_params["run_id"], req.route_params["approval_id"]
    )
    body = read_json_body(req, ApprovalDecisionRequest)
    decided = await record_decision(services, DurableGateway(client), run, record, body)
    return json_response(ApprovalView.of(decided, run), status=202)


async def record_decision(
    services: RunServices,
    gateway: DurableGateway,
    run: RunRecord,
    record: ApprovalRecord,
    body: ApprovalDecisionRequest,
) -> ApprovalRecord:
    """Store the caller's decision on `record` (found by `access.decidable_approval`: exactly one decision wins; the
    same caller's identical retry is delivered again) and ring the approval's doorbell. Every HTTP surface that
    decides approvals goes through here."""
    store = services.store
    caller = current_principal()
    approval_id = record.approval_id
    now = datetime.now(UTC)
    decision = "approved" if body.decision == "approve" else "rejected"
    edited = body.arguments if decision == "approved" else None
    if same_decision(record, decision, caller.id, body.reason, edited):
        # This caller's own decision, sent again (after a 503, or an answer lost on the way back): the same answer.
        # Delivered again while the run goes on; a run over since has had it (a client that retried a lost answer
        # once the run had finished was told 409 "already approved", by itself).
        if not run.finished:
            await deliver(gateway, store, run.run_id, approval_id)
        return record
    _check_open(record, run, now=now, reveal=owns(caller, run.owner_id))
    if edited is not None:
        _check_edit_allowed(record, edited)
        if not record.workflow_gate:
            await _validate_edit(services, run.agent, record, edited)
    try:
        decided = await store.decide_approval(
            approval_id,
            decision,
            decided_by=caller.id,
            decided_by_name=caller.name,
            reason=body.reason,
            edited_arguments=edited,
            decided_at=now,
            current=record,  # read by this request: the write is conditioned on its ETag (a stale one is re-read)
        )
    except AlreadyDecidedError as race:
        if not same_decision(race.current, decision, caller.id, body.reason, edited):
            _check_open(race.current, None, now=now, reveal=owns(caller, run.owner_id))
            raise  # unreachable: a decided record always fails the check
        decided = race.current  # the same caller's concurrent retry won: deliver it as well
    await deliver(gateway, store, run.run_id, approval_id)
    return decided


def same_decision(
    current: ApprovalRecord, decision: str, decided_by: str | None, reason: str | None, edited: object
) -> bool:
    """A retry of the decision already stored (same caller, same content)."""
    return (
        current.status == decision
        and current.decided_by == decided_by
        and current.reason == reason
        and current.edited_arguments == edited
    )


def _check_open(record: ApprovalRecord, run: RunRecord | None, *, now: datetime, reveal: bool) -> None:
    """409 / 410 for an approval that can no longer be decided, most telling first: decided by someone (409, who
    decided: only told to the run's owner and to the decider; another approver learns that it was decided, not by
    whom), the run was cancelled, or its cancel requested (409 `run_finished`: its open approvals are closed as
    expired, but the reason is the cancel, not a deadline), expired by its deadline (410), the run is over otherwise
    (409 `run_finished`)."""
    if is_open(record, run, now=now):
        return
    if record.status in ("approved", "rejected"):
        if reveal or record.decided_by == current_principal().id:
            who = record.decided_by_name or record.decided_by or "an anonymous caller"
            detail = f"It was {record.status} by {who} at {record.decided_at}."
        else:
            detail = f"It was already {record.status}."
        raise ApiProblem(
            409, "approval_already_decided", "The approval was already decided", detail, current_status=record.status
        )
    finished = ApiProblem(409, "run_finished", "The run has already finished", "Its approvals can no longer change.")
    if run is not None and run.finished and run.status == "cancelled":
        raise finished
    if run is not None and run.cancel_requested_at is not None:  # as good as over: it ends `cancelled`
        raise ApiProblem(
            409, "run_finished", "The run has already finished",
            f"Its cancel was requested at {run.cancel_requested_at}: it ends cancelled, and its approvals can no "
            "longer change.",
        )
    if record.status == "expired" or (record.status == "pending" and record.expires_at and record.expires_at <= now):
        raise ApiProblem(410, "approval_expired", "The approval has expired", f"It expired at {record.expires_at}.")
    if (run is not None and run.finished) or record.status != "pending":
        raise finished


def _check_edit_allowed(record: ApprovalRecord, edited: dict[str, object]) -> None:
    """Refuse other arguments where `access.edit_refusal` says so (the same arguments again are no change)."""
    refusal = None if edited == record.arguments else edit_refusal(record)
    if refusal is not None:
        raise refusal


async def _validate_edit(
    services: RunServices, agent_name: str, record: ApprovalRecord, edited: dict[str, object]
) -> None:
    # The run's own tools: an MCP tool's schema is the one discovered when the run started.
    agent = await agent_for_run(
        services.store, agent_or_404(services, agent_name), record.run_id, session_id=record.session_id
    )
    call = FunctionCallContent(call_id=record.call_id, name=record.tool, arguments=record.arguments)
    request = FunctionApprovalRequestContent(id=record.approval_id, function_call=call)
    try:
        # Off the event loop: the check runs a tool's JSON Schema (an MCP server's) over caller-chosen arguments.
        await check_off_loop(decide_approval, agent, request, request.create_approval(arguments=dict(edited)))
    except ToolArgumentsError as error:
        raise ApiProblem(
            422,
            "invalid_arguments",
            "The edited arguments do not fit the tool",
            str(error),
            field="body.arguments",
        ) from error
