"""The OpenAPI 3.1 description of the HTTP API, generated from the route table and the pydantic models it names.

`openapi_document(routes)` turns the routes (`http_api.routes`: method, path, path parameters, query, body and
response models, problems) into the document served at `GET /api/openapi.json`; the functions the host serves come
from the same table. Tests check that every function the app registers is described with its method, path and path
parameters (tests/api/test_route_table.py) and that responses match their schemas (tests/load/test_api_fuzz.py).
A few handlers answer with small dicts; their shapes are described by the `*Body` models below.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic.json_schema import models_json_schema

from http_api.agents import AgentView
from http_api.approvals import ApprovalView
from http_api.problems import PROBLEM_CONTENT_TYPE, Problem
from http_api.routing import Route
from http_api.workflow_models import WorkflowSummary

API_TITLE = "Durable agents API"
API_VERSION = "1.0.0"
REF_TEMPLATE = "#/components/schemas/{model}"


# ------------------------------------------------------------------------------------------------ dict-shaped bodies


class AuthHealth(BaseModel):
    mode: Literal["none", "easyauth", "jwt"]
    warning: str | None = None


class LiveStreams(BaseModel):
    """The live streams of the process that answered (each process has its own)."""

    watchers: int = Field(description="one per run being streamed, shared by that run's connections")
    subscribers: int = Field(description="open stream connections")


class HealthBody(BaseModel):
    status: Literal["ok"]
    agents: list[str]
    store: Literal["cosmos", "sqlite"]
    model_provider: str
    durable_backend: str = Field(description="the Durable storage provider the Functions host is configured with")
    durable_engine: Literal["devhost", "functions-host"] = Field(
        description="who runs the orchestrations: `devhost` (its own engine stands in for the configured backend, "
        "locally) or `functions-host` (the Durable extension on the configured backend)"
    )
    task_hub: str | None = Field(description="TASKHUB_NAME")
    auth_mode: str = Field(description="AUTH_MODE (`none`: the app authenticates no caller)")
    on_azure: bool
    warnings: list[str] = Field(description="settings allowed on purpose that production should not keep")
    auth: AuthHealth
    streams: LiveStreams


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


# ------------------------------------------------------------------------------------------------ document


# Every route can also answer these (see http_api.adapter): the store is down, or an unexpected error.
_ALWAYS_PROBLEMS = (500, 503)


def openapi_document(routes: Sequence[Route]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of these routes (paths in their order)."""
    bodies = {route.body for route in routes if route.body is not None}
    answers = {m for route in routes for m in route.responses.values() if m is not None} | {Problem}
    _, definitions = models_json_schema(
        [(m, "validation") for m in sorted(bodies, key=_name)]
        + [(m, "serialization") for m in sorted(answers, key=_name)],
        ref_template=REF_TEMPLATE,
    )
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.api_path, {})[route.method] = _operation(route)
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


def _operation(route: Route) -> dict[str, Any]:
    spec: dict[str, Any] = {"operationId": route.operation, "summary": route.summary, "tags": [route.tag]}
    if route.public:
        spec["security"] = []
    parameters = [
        {"name": param.name, "in": "path", "required": True, "schema": {"type": "string", "pattern": param.pattern}}
        for param in route.params
    ]
    parameters += _query_parameters(route.query)
    if route.idempotent:
        parameters.append(
            {"name": "Idempotency-Key", "in": "header", "required": False,
             "description": "The same key and body from the same caller within 24 h return the same run",
             "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^[\x20-\x7e]+$"}}
        )
    if parameters:
        spec["parameters"] = parameters
    if route.body is not None:
        spec["requestBody"] = {"required": True, "content": {"application/json": {"schema": _ref(route.body)}}}
    responses: dict[str, Any] = {}
    if route.stream:
        sse = {"text/event-stream": {"schema": _OPENAI_SSE_EVENT if route.openai_events else _SSE_EVENT}}
        responses["200"] = {"description": "Server-Sent Events", "content": sse}
    for status, model in route.responses.items():
        text = _FAILED_RUN_TEXT if status == 500 else _STATUS_TEXT.get(status, "OK")
        response = responses.setdefault(str(status), {})
        response["description"] = f"{text}, or Server-Sent Events (`stream`)" if "content" in response else text
        if model is not None:
            response.setdefault("content", {})["application/json"] = {"schema": _ref(model)}
        elif route.text is not None and status < 300:
            response["content"] = {route.text: {"schema": {"type": "string"}}}
    # Any route but the public ones answers 401 when AUTH_MODE requires a caller and the request names none, and 400
    # when it names one twice (`identity.check_sent_once`).
    for status in sorted({*route.problems, *_ALWAYS_PROBLEMS, *(() if route.public else (400, 401))}):
        # A status that also has a body of its own (a failed run's 500) keeps it, next to the problem.
        response = responses.setdefault(str(status), {"description": _STATUS_TEXT.get(status, "Problem")})
        response.setdefault("content", {})[PROBLEM_CONTENT_TYPE] = {"schema": _ref(Problem)}
    spec["responses"] = responses
    return spec


# One event of a stream (pings are comments, not events); `data` is JSON (see docs/streams.md).
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
    403: "Not allowed (e.g. not an approver of this approval; a bearer token without a required scope or app role)",
    404: "Not found", 409: "Conflict with the current state", 410: "Gone (expired)",
    413: "Body too large", 415: "Body is not JSON", 422: "Validation failed", 500: "Unexpected server error",
    503: "The store is temporarily unavailable (see Retry-After)",
}
