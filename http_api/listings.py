"""The caller's lists: the approvals they may decide (an inbox across runs and workflows) and their runs.

Both page newest first with a continuation token that wraps the store's cursor, signed and bound to the caller.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import azure.functions as func
from pydantic import BaseModel, Field

from agent_runs.services import RunServices
from agent_runtime.approvers import caller_keys, principal_key
from http_api.access import can_decide
from http_api.adapter import http_endpoint, json_response, query_model
from http_api.approvals import ApprovalView
from http_api.caller import current_principal
from http_api.models import RunStatus
from http_api.paging import next_token, store_cursor, store_paging
from http_api.request_context import base_url, run_path
from session_store import RunRecord
from session_store.rules import is_unwritten_start

INBOX_TOKEN_SCOPE = "approval-inbox"
RUNS_TOKEN_SCOPE = "run-list"


class InboxQuery(BaseModel):
    status: Literal["pending", "approved", "rejected", "expired"] = "pending"
    continuation_token: str | None = None
    limit: int = Field(default=20, ge=1, le=100)


class InboxItem(ApprovalView):
    agent: str = Field(description="the agent, or the workflow for a workflow's approval gate")
    kind: Literal["agent", "workflow"]
    run_link: str


class InboxBody(BaseModel):
    approvals: list[InboxItem]
    continuation_token: str | None = None


class RunsQuery(BaseModel):
    status: RunStatus | None = None
    agent: str | None = Field(default=None, max_length=128)
    continuation_token: str | None = None
    limit: int = Field(default=20, ge=1, le=100)


class RunListItem(BaseModel):
    run_id: str
    session_id: str
    agent: str
    kind: Literal["agent", "workflow"]
    status: RunStatus
    created_at: datetime | None
    updated_at: datetime | None
    link: str


class RunListBody(BaseModel):
    runs: list[RunListItem]
    continuation_token: str | None = None


def _run_link(root: str, run: RunRecord) -> str:
    return root + run_path(run.run_id, run.kind)


@http_endpoint
async def list_inbox(req: func.HttpRequest) -> func.HttpResponse:
    """Every approval the caller may decide (with `?status=pending`, the default: what waits for them)."""
    services = RunServices.current()
    caller = current_principal()
    query = query_model(req, InboxQuery)
    cursor = store_cursor(services, query.continuation_token, INBOX_TOKEN_SCOPE, caller)
    # `none` mode: the one principal is trusted as every approver of its own runs, so its id key finds them all.
    keys = [principal_key(caller.id)] if caller.trusted else caller_keys(caller.id, caller.roles)
    async with store_paging():
        page = await services.store.list_decidable_approvals(
            keys, status=query.status, limit=query.limit, continuation=cursor
        )
    root = base_url(req)
    items: list[InboxItem] = []
    for record in page.items:
        run = await services.store.get_run(record.run_id)
        if run is None or not can_decide(caller, record, run.owner_id):
            continue  # e.g. the owner of a run whose approvals exclude them (separation of duties)
        view = ApprovalView.of(record, run).model_dump()
        items.append(InboxItem(**view, agent=run.agent, kind=run.kind, run_link=_run_link(root, run)))
    token = next_token(services, page.continuation, INBOX_TOKEN_SCOPE, caller)
    return json_response(InboxBody(approvals=items, continuation_token=token))


@http_endpoint
async def list_runs(req: func.HttpRequest) -> func.HttpResponse:
    """The caller's runs (agent and workflow runs, including a workflow's child runs), newest first."""
    services = RunServices.current()
    caller = current_principal()
    query = query_model(req, RunsQuery)
    cursor = store_cursor(services, query.continuation_token, RUNS_TOKEN_SCOPE, caller)
    async with store_paging():
        page = await services.store.list_owner_runs(
            caller.id, status=query.status, agent=query.agent, limit=query.limit, continuation=cursor
        )
    root = base_url(req)
    items = [
        RunListItem(
            **run.model_dump(include={"run_id", "session_id", "agent", "kind", "status", "created_at", "updated_at"}),
            link=_run_link(root, run),
        )
        for run in page.items
        if not is_unwritten_start(run)  # no run anyone started (`access.stored_run`): a page may hold fewer
    ]
    token = next_token(services, page.continuation, RUNS_TOKEN_SCOPE, caller)
    return json_response(RunListBody(runs=items, continuation_token=token))
