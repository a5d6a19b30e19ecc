"""The OpenAPI 3.1 description of the HTTP API, generated from the pydantic models the handlers use.

`OPERATIONS` is the route table (method, path, parameters, request and response models); `openapi_document()` turns
it into the document served at `GET /api/openapi.json`. A test checks that every route `function_app.py` serves is
described here and that responses match their schemas (tests/load/test_api_fuzz.py), so the two cannot drift.
A few handlers answer with small dicts; their shapes are described by the `*Body` models below.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Literal

import azure.functions as func
from pydantic import BaseModel, Field
from pydantic.json_schema import models_json_schema

from http_api.adapter import http_endpoint
from http_api.agents import AgentView
from http_api.approvals import ApprovalsQuery, ApprovalView
from http_api.caller import public
from http_api.listings import InboxBody, InboxQuery, RunListBody, RunsQuery
from http_api.models import ApprovalDecisionRequest, RunView, StartRunRequest
from http_api.openai_responses.models import (
    CreateResponseRequest,
    DeletedResponse,
    InputItemList,
    InputItemsQuery,
    OpenAIErrorBody,
    ResponseObject,
    RetrieveQuery,
)
from http_api.polling import PollQuery
from http_api.problems import PROBLEM_CONTENT_TYPE, Problem
from http_api.sessions import DeleteSessionQuery, MessagesQuery, SessionListBody, SessionsQuery, SessionView
from http_api.streams.query import StreamQuery
from http_api.workflow_models import SignalRequest, StartWorkflowRequest, WorkflowRunView, WorkflowSummary

API_TITLE = "Durable agents API"
API_VERSION = "1.0.0"
REF_TEMPLATE = "#/components/schemas/{model}"


# ------------------------------------------------------------------------------------------------ dict-shaped bodies


class AuthHealth(BaseModel):
    mode: Literal["none", "easyauth", "jwt"]
    warning: str | None = None


class HealthBody(BaseModel):
    status: Literal["ok"]
    agents: list[str]
    store: Literal["cosmos", "sqlite"]
    model_provider: str
    durable_backend: str = Field(description="the Durable storage provider the Functions host is configured with")
    task_hub: str | None = Field(description="TASKHUB_NAME")
    auth_mode: str = Field(description="AUTH_MODE (`none`: the app authenticates no caller)")
    on_azure: bool
    warnings: list[str] = Field(description="settings allowed on purpose that production should not keep")
    auth: AuthHealth


class AgentListBody(BaseModel):
    agents: list[AgentView]


class ApprovalListBody(BaseModel):
    run_id: str
    approvals: list[ApprovalView]


class SessionMessage(BaseModel, extra="allow"):
    """One stored message: its `seq`, the run that wrote it, then the message itself (role, contents, ids...)."""

    seq: int
    run_id: str | None = None
    role: str


class MessagePageBody(BaseModel):
    session_id: str
    messages: list[SessionMessage]
    continuation_token: str | None = None


class CancelAcceptedBody(BaseModel):
    run_id: str
    status: Literal["cancelling"]


class WorkflowListBody(BaseModel):
    workflows: list[WorkflowSummary]


class WorkflowCancelBody(BaseModel):
    run_id: str
    status: Literal["cancelling"]
    cancelled_child_runs: list[str]


class SignalAcceptedBody(BaseModel):
    run_id: str
    signal: str
    signal_id: str
    index: int  # the signal's position in the queue of its name (1, 2, ...): consumed in this order
    status: Literal["accepted"]


class OpenApiBody(BaseModel, extra="allow"):
    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]


# ------------------------------------------------------------------------------------------------ route table


class Operation(BaseModel):
    method: Literal["get", "post", "delete"]
    path: str
    operation_id: str
    summary: str
    tag: str
    query: type[BaseModel] | None = None
    body: type[BaseModel] | None = None
    responses: dict[int, type[BaseModel] | None] = Field(default_factory=dict)
    problems: tuple[int, ...] = ()
    public: bool = False  # anonymous (no function key)
    text: str | None = None  # a non-JSON success body: its media type (range), e.g. the page's files
    idempotent: bool = False  # accepts an Idempotency-Key header
    stream: bool = False  # 200 is a text/event-stream (see README "Live streams")
    openai_events: bool = False  # ... of OpenAI's Responses events (`event:` + `data:`, no `id:`), or JSON

    def path_params(self) -> list[str]:
        return [part[1:-1] for part in self.path.split("/") if part.startswith("{") and part.endswith("}")]


_RUN = (404, 422)
OPERATIONS: tuple[Operation, ...] = (
    Operation(method="get", path="/api/health", operation_id="health", summary="Is the app up?", tag="app",
              responses={200: HealthBody}, public=True),
    Operation(method="get", path="/api/openapi.json", operation_id="openapi", summary="This document", tag="app",
              responses={200: OpenApiBody}, public=True),
    Operation(method="get", path="/api/ui", operation_id="ui_page", summary="The page: approvals inbox, runs, chat",
              tag="app", responses={200: None}, text="text/html", public=True),
    Operation(method="get", path="/api/ui/{file}", operation_id="ui_file", summary="A script or style of the page",
              tag="app", responses={200: None}, text="text/*", problems=(404,), public=True),
    Operation(method="get", path="/api/agents", operation_id="list_agents", summary="The agents this app serves",
              tag="agents", responses={200: AgentListBody}),
    Operation(method="get", path="/api/agents/{agent}", operation_id="get_agent", summary="One agent", tag="agents",
              responses={200: AgentView}, problems=(404,)),
    Operation(method="post", path="/api/agents/{agent}/runs", operation_id="start_run",
              summary="Start a run (optionally in a session; optionally wait up to wait_seconds)", tag="runs",
              body=StartRunRequest, responses={200: RunView, 202: RunView, 500: RunView},
              problems=(400, 404, 409, 413, 415, 422), idempotent=True),
    Operation(method="get", path="/api/runs/{run_id}", operation_id="get_run",
              summary="Poll a run: what is new since the continuation token (long-poll with wait_seconds)",
              tag="runs", query=PollQuery, responses={200: RunView, 202: RunView, 500: RunView},
              problems=(400, 401, 404, 422)),
    Operation(method="post", path="/api/runs/{run_id}/cancel", operation_id="cancel_run", summary="Cancel a run",
              tag="runs", responses={202: CancelAcceptedBody}, problems=(404, 409)),
    Operation(method="get", path="/api/runs/{run_id}/approvals", operation_id="list_approvals",
              summary="A run's approvals (optionally by status)", tag="approvals", query=ApprovalsQuery,
              responses={200: ApprovalListBody}, problems=_RUN),
    Operation(method="post", path="/api/runs/{run_id}/approvals/{approval_id}", operation_id="decide_approval",
              summary="Approve (optionally with edited arguments) or reject a pending tool call", tag="approvals",
              body=ApprovalDecisionRequest, responses={202: ApprovalView},
              problems=(400, 403, 404, 409, 410, 413, 415, 422)),
    Operation(method="get", path="/api/sessions/{session_id}", operation_id="get_session",
              summary="A session and its runs", tag="sessions", responses={200: SessionView}, problems=(404,)),
    Operation(method="delete", path="/api/sessions/{session_id}", operation_id="delete_session",
              summary="Delete a session with everything in it and purge its runs' Durable history "
              "(?cancel=true: terminate an active run instead of 409)", tag="sessions", query=DeleteSessionQuery,
              responses={204: None}, problems=(404, 409, 422)),
    Operation(method="get", path="/api/sessions/{session_id}/messages", operation_id="list_session_messages",
              summary="Page through a session's messages", tag="sessions", query=MessagesQuery,
              responses={200: MessagePageBody}, problems=(400, 401, 404, 422)),
    Operation(method="get", path="/api/workflows", operation_id="list_workflows",
              summary="The workflows this app serves, with their input schemas", tag="workflows",
              responses={200: WorkflowListBody}),
    Operation(method="get", path="/api/workflows/{name}", operation_id="get_workflow", summary="One workflow",
              tag="workflows", responses={200: WorkflowSummary}, problems=(404,)),
    Operation(method="post", path="/api/workflows/{name}/runs", operation_id="start_workflow",
              summary="Start a workflow run (optionally wait up to wait_seconds)", tag="workflows",
              body=StartWorkflowRequest, responses={200: WorkflowRunView, 202: WorkflowRunView, 500: WorkflowRunView},
              problems=(400, 404, 409, 413, 415, 422), idempotent=True),
    Operation(method="get", path="/api/workflows/runs/{run_id}", operation_id="get_workflow_run",
              summary="Poll a workflow run: steps finished since the continuation token, the active step",
              tag="workflows", query=PollQuery,
              responses={200: WorkflowRunView, 202: WorkflowRunView, 500: WorkflowRunView},
              problems=(400, 401, 404, 422)),
    Operation(method="post", path="/api/workflows/runs/{run_id}/cancel", operation_id="cancel_workflow_run",
              summary="Cancel a workflow run and its running child runs", tag="workflows",
              responses={202: WorkflowCancelBody}, problems=(404, 409)),
    Operation(method="post", path="/api/workflows/runs/{run_id}/signals/{name}", operation_id="signal_workflow_run",
              summary="Send a signal (with a payload) to a workflow run", tag="workflows", body=SignalRequest,
              responses={202: SignalAcceptedBody}, problems=(400, 404, 409, 413, 415, 422)),
    # The caller's lists (identities: README "Callers and identities")
    Operation(method="get", path="/api/approvals", operation_id="list_approval_inbox",
              summary="Every approval the caller may decide, across runs and workflows (newest first)",
              tag="approvals", query=InboxQuery, responses={200: InboxBody}, problems=(400, 401, 422)),
    Operation(method="get", path="/api/runs", operation_id="list_my_runs",
              summary="The caller's runs (newest first; by status and agent)", tag="runs", query=RunsQuery,
              responses={200: RunListBody}, problems=(400, 401, 422)),
    Operation(method="get", path="/api/sessions", operation_id="list_my_sessions",
              summary="The caller's sessions (newest first, with last activity)", tag="sessions",
              query=SessionsQuery, responses={200: SessionListBody}, problems=(400, 401, 422)),
    Operation(method="get", path="/api/runs/{run_id}/stream", operation_id="stream_run",
              summary="Live stream (SSE) of a run: update, delta, status, done events; resumable", tag="runs",
              query=StreamQuery, stream=True, problems=(400, 401, 404, 422)),
    Operation(method="get", path="/api/workflows/runs/{run_id}/stream", operation_id="stream_workflow_run",
              summary="Live stream (SSE) of a workflow run: steps, status with child runs, done; resumable",
              tag="workflows", query=StreamQuery, stream=True, problems=(400, 401, 404, 422)),
)

# The OpenAI Responses API (http_api/openai_responses): OpenAI's request and response shapes, and its error shape.
_OPENAI_ERRORS: dict[int, type[BaseModel] | None] = {
    status: OpenAIErrorBody for status in (400, 404, 409, 410, 500, 503)
}
OPERATIONS += (
    Operation(method="post", path="/api/v1/responses", operation_id="create_response",
              summary="OpenAI Responses: start a run on the agent named by `model` (or answer its approval requests "
              "with mcp_approval_response items); waits for the turn unless `background`; `stream`: its events",
              tag="openai", body=CreateResponseRequest, responses={200: ResponseObject, **_OPENAI_ERRORS},
              stream=True, openai_events=True),
    Operation(method="get", path="/api/v1/responses/{response_id}", operation_id="get_response",
              summary="OpenAI Responses: one response (a turn of a run); `stream=true`: its events, after "
              "`starting_after`", tag="openai", query=RetrieveQuery,
              responses={200: ResponseObject, **_OPENAI_ERRORS}, stream=True, openai_events=True),
    Operation(method="delete", path="/api/v1/responses/{response_id}", operation_id="delete_response",
              summary="OpenAI Responses: delete the conversation (session) the response belongs to", tag="openai",
              responses={200: DeletedResponse, **_OPENAI_ERRORS}),
    Operation(method="post", path="/api/v1/responses/{response_id}/cancel", operation_id="cancel_response",
              summary="OpenAI Responses: cancel the run behind the response", tag="openai",
              responses={200: ResponseObject, **_OPENAI_ERRORS}),
    Operation(method="get", path="/api/v1/responses/{response_id}/input_items", operation_id="list_input_items",
              summary="OpenAI Responses: what the client sent for the response (paged)", tag="openai",
              query=InputItemsQuery, responses={200: InputItemList, **_OPENAI_ERRORS}),
)

# Every route can also answer these (see http_api.adapter): the store is down, or an unexpected error.
_ALWAYS_PROBLEMS = (500, 503)


# ------------------------------------------------------------------------------------------------ document


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document (built once; the same dict is returned on every call: do not mutate it)."""
    bodies = {op.body for op in OPERATIONS if op.body is not None}
    answers = {m for op in OPERATIONS for m in op.responses.values() if m is not None} | {Problem}
    _, definitions = models_json_schema(
        [(m, "validation") for m in sorted(bodies, key=_name)]
        + [(m, "serialization") for m in sorted(answers, key=_name)],
        ref_template=REF_TEMPLATE,
    )
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method] = _operation(op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": API_TITLE,
            "version": API_VERSION,
            "description": "Durable AI agents on Azure Functions: runs, approvals, sessions. Errors are RFC 9457 "
            "problem+json with a stable `code`.",
        },
        "paths": paths,
        "components": {
            "schemas": definitions.get("$defs", {}),
            "securitySchemes": {"functionKey": {"type": "apiKey", "in": "header", "name": "x-functions-key"}},
        },
        "security": [{"functionKey": []}],
    }


def _name(model: type[BaseModel]) -> str:
    return model.__name__


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": REF_TEMPLATE.format(model=model.__name__)}


def _operation(op: Operation) -> dict[str, Any]:
    spec: dict[str, Any] = {"operationId": op.operation_id, "summary": op.summary, "tags": [op.tag]}
    if op.public:
        spec["security"] = []
    parameters = [
        {"name": name, "in": "path", "required": True,
         "schema": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"}}
        for name in op.path_params()
    ]
    parameters += _query_parameters(op.query)
    if op.idempotent:
        parameters.append(
            {"name": "Idempotency-Key", "in": "header", "required": False,
             "description": "The same key and body from the same caller within 24 h return the same run",
             "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^[\x20-\x7e]+$"}}
        )
    if parameters:
        spec["parameters"] = parameters
    if op.body is not None:
        spec["requestBody"] = {"required": True, "content": {"application/json": {"schema": _ref(op.body)}}}
    responses: dict[str, Any] = {}
    if op.stream:
        sse = {"text/event-stream": {"schema": _OPENAI_SSE_EVENT if op.openai_events else _SSE_EVENT}}
        responses["200"] = {"description": "Server-Sent Events", "content": sse}
    for status, model in op.responses.items():
        text = _FAILED_RUN_TEXT if status == 500 else _STATUS_TEXT.get(status, "OK")
        response = responses.setdefault(str(status), {})
        response["description"] = f"{text}, or Server-Sent Events (`stream`)" if "content" in response else text
        if model is not None:
            response.setdefault("content", {})["application/json"] = {"schema": _ref(model)}
        elif op.text is not None and status < 300:
            response["content"] = {op.text: {"schema": {"type": "string"}}}
    # Any route but the public ones answers 401 when AUTH_MODE requires a caller and the request names none.
    for status in sorted({*op.problems, *_ALWAYS_PROBLEMS, *(() if op.public else (401,))}):
        # A status that also has a body of its own (a failed run's 500) keeps it, next to the problem.
        response = responses.setdefault(str(status), {"description": _STATUS_TEXT.get(status, "Problem")})
        response.setdefault("content", {})[PROBLEM_CONTENT_TYPE] = {"schema": _ref(Problem)}
    spec["responses"] = responses
    return spec


# One event of a stream (pings are comments, not events); `data` is JSON (see README "Live streams").
_SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "required": ["event", "id", "data"],
    "properties": {
        "event": {"enum": ["update", "delta", "status", "done"]},
        "id": {"type": "string", "pattern": r"^-?[0-9]+\.[0-9]+\.[0-9]+\.([0-9a-f]{8}|-)$"},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}


# One event of a Responses stream (`stream: true`): OpenAI's event, its `type` as the event name.
_OPENAI_SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string", "pattern": r"^response\.[a-z_.]+$"},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}


def _query_parameters(model: type[BaseModel] | None) -> list[dict[str, Any]]:
    if model is None:
        return []
    schema = model.model_json_schema(ref_template=REF_TEMPLATE)
    required = set(schema.get("required", []))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": prop}
        for name, prop in schema.get("properties", {}).items()
    ]


_FAILED_RUN_TEXT = "The run failed (the body is the run, with `error`), or an unexpected server error (problem)"
_STATUS_TEXT = {
    200: "Done", 204: "Deleted", 202: "Accepted: still running (poll the Location) or decision recorded",
    400: "Malformed request", 401: "Not authenticated (AUTH_MODE), or an invalid continuation token",
    403: "Not allowed (e.g. not an approver of this approval)",
    404: "Not found", 409: "Conflict with the current state", 410: "Gone (expired)",
    413: "Body too large", 415: "Body is not JSON", 422: "Validation failed", 500: "Unexpected server error",
    503: "The store is temporarily unavailable (see Retry-After)",
}


@http_endpoint
@public
async def serve_openapi(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(json.dumps(openapi_document()), status_code=200, mimetype="application/json")
