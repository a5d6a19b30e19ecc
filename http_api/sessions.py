"""Sessions over HTTP: read one (with its runs), page its messages, delete it with everything in it."""

from __future__ import annotations

from datetime import datetime

import azure.functions as func
from pydantic import BaseModel, Field

from agent_runs.services import RunServices
from agent_runtime.messages import Usage
from http_api.adapter import http_endpoint, json_response, query_model
from http_api.problems import ApiProblem, not_found
from http_api.request_context import base_url, verify_token
from session_store import SessionRecord, SessionStore

TOKEN_SCOPE = "session-messages"


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


async def session_or_404(store: SessionStore, session_id: str) -> SessionRecord:
    session = await store.get_session(session_id)
    if session is None:
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
            **session.model_dump(include={"session_id", "agent", "created_at", "updated_at", "metadata"}),
            active_run_id=session.active_run_id,
            run_count=session.run_count,
            message_count=await store.count_messages(session.session_id),
            runs=[RunSummary.model_validate(run.model_dump()) for run in runs],
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
        token = services.tokens.issue(TOKEN_SCOPE, session.session_id, {"seq": page.items[-1].seq})
    return json_response(
        {
            "session_id": session.session_id,
            "messages": [{"seq": r.seq, "run_id": r.run_id, **r.payload} for r in page.items],
            "continuation_token": token,
        }
    )


@http_endpoint
async def delete_session(req: func.HttpRequest) -> func.HttpResponse:
    store = RunServices.current().store
    session = await session_or_404(store, req.route_params["session_id"])
    await delete_idle_session(store, session)
    return func.HttpResponse(status_code=204)


async def delete_idle_session(store: SessionStore, session: SessionRecord) -> None:
    """Delete the session with everything in it; 409 while a run in it is still active."""
    if session.active_run_id:
        active = await store.get_run(session.active_run_id)
        if active is not None and not active.finished:
            raise ApiProblem(
                409,
                "session_busy",
                "The session has an active run",
                f"Cancel run '{active.run_id}' (or wait for it) before deleting the session.",
                active_run_id=active.run_id,
            )
    await store.delete_session(session.session_id)
