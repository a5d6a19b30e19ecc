"""Sessions over HTTP: read one (with its runs), page its messages, delete it with everything in it."""

from __future__ import annotations

from datetime import datetime

import azure.durable_functions as df
import azure.functions as func
from pydantic import BaseModel, Field

from agent_runs.services import RunServices
from agent_runtime.messages import Usage
from http_api import purge
from http_api.access import owns
from http_api.adapter import http_endpoint, json_response, query_model
from http_api.caller import current_principal
from http_api.durable_gateway import DurableGateway
from http_api.paging import next_token, store_cursor, store_paging
from http_api.problems import ApiProblem, not_found
from http_api.request_context import base_url, verify_token
from http_api.run_views import message_view, reconcile
from http_api.token_binding import bound_to
from session_store import SessionRecord, SessionStore
from session_store.rules import is_unwritten_start
from workflow_runtime.contracts import WORKFLOW_AGENT_PREFIX

TOKEN_SCOPE = "session-messages"
LIST_TOKEN_SCOPE = "session-list"


class MessagesQuery(BaseModel):
    continuation_token: str | None = None
    limit: int = Field(default=50, ge=1, le=200)


class RunSummary(BaseModel):
    run_id: str
    status: str
    created_at: datetime | None
    updated_at: datetime | None
    usage: Usage = Field(default_factory=Usage, description="tokens (and cost when priced) once the run finished")


class SessionView(BaseModel):
    session_id: str
    agent: str
    created_at: datetime | None
    updated_at: datetime | None
    metadata: dict[str, object]
    active_run_id: str | None
    run_count: int
    message_count: int
    runs: list[RunSummary]
    links: dict[str, str]
    forked_from: dict[str, object] | None = None
    """Where a forked session came from: `session_id`, `run_id`, `forked_at`, `forked_by` (`response_id`: a Responses
    conversation branched after that response)."""


_SESSION_FIELDS = {"session_id", "agent", "created_at", "updated_at", "metadata", "forked_from"}


async def session_or_404(store: SessionStore, session_id: str) -> SessionRecord:
    """The session, if the caller owns it; 404 otherwise (another principal's session is not revealed)."""
    session = await store.get_session(session_id)
    if session is None or not owns(current_principal(), session.owner_id):
        raise not_found("session_not_found", "Session", session_id, field="path.session_id")
    return session


@http_endpoint
async def get_session(req: func.HttpRequest) -> func.HttpResponse:
    store = RunServices.current().store
    session = await session_or_404(store, req.route_params["session_id"])
    runs = await store.list_runs(session.session_id)
    root = f"{base_url(req)}/api/sessions/{session.session_id}"
    return json_response(
        SessionView(
            **session.model_dump(include=_SESSION_FIELDS),
            active_run_id=session.active_run_id,
            run_count=session.run_count,
            message_count=await store.count_messages(session.session_id),
            runs=[RunSummary.model_validate(run.model_dump()) for run in runs if not is_unwritten_start(run)],
            links={"self": root, "messages": f"{root}/messages"},
        )
    )


@http_endpoint
async def list_messages(req: func.HttpRequest) -> func.HttpResponse:
    services = RunServices.current()
    session = await session_or_404(services.store, req.route_params["session_id"])
    query = query_model(req, MessagesQuery)
    cursor = verify_token(services, query.continuation_token, TOKEN_SCOPE, session.session_id)
    after = cursor.get("seq") if cursor else None
    page = await services.store.list_messages(
        session.session_id, after_seq=after if isinstance(after, int) else None, limit=query.limit
    )
    token = None
    if page.continuation is not None and page.items:
        cursor = {"seq": page.items[-1].seq, **bound_to(session.owner_id)}
        token = services.tokens.issue(TOKEN_SCOPE, session.session_id, cursor)
    return json_response(
        {
            "session_id": session.session_id,
            "messages": [{"seq": r.seq, "run_id": r.run_id, **message_view(r)} for r in page.items],
            "continuation_token": token,
        }
    )


class DeleteSessionQuery(BaseModel):
    cancel: bool = Field(default=False, description="terminate the session's active run instead of refusing (409)")


@http_endpoint
async def delete_session(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    """Delete the session with everything in it, and purge the Durable history of its runs."""
    store = RunServices.current().store
    session = await session_or_404(store, req.route_params["session_id"])
    query = query_model(req, DeleteSessionQuery)
    await delete_session_and_runs(store, client, session, cancel=query.cancel)
    return func.HttpResponse(status_code=204)


async def delete_session_and_runs(
    store: SessionStore, client: df.DurableOrchestrationClient, session: SessionRecord, *, cancel: bool
) -> None:
    """Delete the session with everything in it and purge its runs' Durable history; an active run is a 409 unless
    `cancel` (then it is stopped first)."""
    gateway = DurableGateway(client)
    runs = await store.list_runs(session.session_id)
    active = [run for run in runs if not run.finished]
    for run in active:
        run = await reconcile(store, run, await gateway.state(run.run_id))
        if run.finished:
            continue
        if not cancel:
            raise ApiProblem(
                409,
                "session_busy",
                "The session has an active run",
                f"Cancel run '{run.run_id}' (or wait for it, or delete with ?cancel=true) before deleting the session.",
                active_run_id=run.run_id,
            )
        await purge.stop_run(store, client, run)
    await purge.purge_histories(client, [run.instance_id or run.run_id for run in runs])
    await store.delete_session(session.session_id)


class SessionsQuery(BaseModel):
    continuation_token: str | None = None
    limit: int = Field(default=20, ge=1, le=100)


class SessionListItem(BaseModel):
    session_id: str
    agent: str
    created_at: datetime | None
    last_activity_at: datetime | None
    active_run_id: str | None
    run_count: int
    metadata: dict[str, object]


class SessionListBody(BaseModel):
    sessions: list[SessionListItem]
    continuation_token: str | None = None


@http_endpoint
async def list_sessions(req: func.HttpRequest) -> func.HttpResponse:
    """The caller's sessions, newest first (workflow bookkeeping sessions are not listed)."""
    services = RunServices.current()
    caller = current_principal()
    query = query_model(req, SessionsQuery)
    cursor = store_cursor(services, query.continuation_token, LIST_TOKEN_SCOPE, caller)
    async with store_paging():
        page = await services.store.list_sessions(owner_id=caller.id, limit=query.limit, continuation=cursor)
    items = [
        SessionListItem(
            **s.model_dump(include={"session_id", "agent", "created_at", "active_run_id", "run_count", "metadata"}),
            last_activity_at=s.updated_at,
        )
        for s in page.items
        if not s.agent.startswith(WORKFLOW_AGENT_PREFIX)
    ]
    token = next_token(services, page.continuation, LIST_TOKEN_SCOPE, caller)
    return json_response(SessionListBody(sessions=items, continuation_token=token))
