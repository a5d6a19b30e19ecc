"""The route table: every HTTP function of the app, declared once (`http_api.routing.Route`).

`register(app)` gives the Functions app one function per route (`http_api.route_functions`: the name, method,
template, auth level and Durable client binding declared here); `GET /api/openapi.json` is generated from the same
table (`http_api.openapi`), and each route's path parameters (`PathParam`: the ids they accept, the 404 any other
value gets) are checked before its handler runs (`http_api.path_ids`).
"""

from __future__ import annotations

import functools
import json
from typing import Any

import azure.durable_functions as df
import azure.functions as func
from pydantic import BaseModel

from http_api import agents, approvals, listings, route_functions, runs, sessions, workflows
from http_api.adapter import http_endpoint
from http_api.agents import AgentView
from http_api.approvals import ApprovalsQuery, ApprovalView
from http_api.caller import public
from http_api.listings import InboxBody, InboxQuery, RunListBody, RunsQuery
from http_api.models import ApprovalDecisionRequest, RunView, StartRunRequest
from http_api.openai_responses import handlers as responses
from http_api.openai_responses.models import (
    CreateResponseRequest,
    DeletedResponse,
    InputItemList,
    InputItemsQuery,
    OpenAIErrorBody,
    ResponseObject,
    RetrieveQuery,
)
from http_api.openapi import (
    AgentListBody,
    ApprovalListBody,
    CancelAcceptedBody,
    HealthBody,
    MessagePageBody,
    OpenApiBody,
    SignalAcceptedBody,
    WorkflowCancelBody,
    WorkflowListBody,
    openapi_document,
)
from http_api.path_ids import PathParam
from http_api.polling import PollQuery
from http_api.routing import Route, check_table
from http_api.sessions import DeleteSessionQuery, MessagesQuery, SessionListBody, SessionsQuery, SessionView
from http_api.streams import handlers as streams
from http_api.streams.query import StreamQuery
from http_api.ui import serve as ui
from http_api.workflow_models import SignalRequest, StartWorkflowRequest, WorkflowRunView, WorkflowSummary


def register(app: df.DFApp) -> None:
    route_functions.register(app, ROUTES)


@functools.cache
def document() -> dict[str, Any]:
    """The OpenAPI document of the table (built once; the same dict is returned on every call: do not mutate it)."""
    return openapi_document(ROUTES)


@http_endpoint
@public
async def serve_openapi(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(json.dumps(document()), status_code=200, mimetype="application/json")


# ------------------------------------------------------------------------------------------------ path parameters
# A malformed id gets the 404 its route gives an unknown one.
AGENT = PathParam(name="agent", not_found="agent_not_found", noun="Agent")
RUN = PathParam(name="run_id", not_found="run_not_found", noun="Run")
APPROVAL = PathParam(name="approval_id", not_found="approval_not_found", noun="Approval")
SESSION = PathParam(name="session_id", not_found="session_not_found", noun="Session")
WORKFLOW = PathParam(name="name", not_found="workflow_not_found", noun="Workflow")
WORKFLOW_RUN = PathParam(name="run_id", not_found="workflow_run_not_found", noun="Workflow run")
SIGNAL = PathParam(name="name", not_found="signal_not_found", noun="Signal")
UI_FILE = PathParam(name="file", not_found="ui_file_not_found", noun="File")
RESPONSE = PathParam(name="response_id", not_found="response_not_found", noun="Response")

# ------------------------------------------------------------------------------------------------ the table
_RUN = (404, 422)
# The OpenAI Responses API (http_api/openai_responses): OpenAI's request and response shapes, and its error shape.
_OPENAI_ERRORS: dict[int, type[BaseModel] | None] = {
    status: OpenAIErrorBody for status in (400, 404, 409, 410, 500, 503)
}

ROUTES: tuple[Route, ...] = check_table((
    # The app
    Route(name="health", method="get", path="health", handler=agents.health, public=True,
          summary="Is the app up?", tag="app", responses={200: HealthBody}),
    Route(name="openapi_document", operation_id="openapi", method="get", path="openapi.json", handler=serve_openapi,
          public=True, summary="This document", tag="app", responses={200: OpenApiBody}),
    Route(name="ui_page", method="get", path="ui", handler=ui.page, public=True,
          summary="The page: approvals inbox, runs, chat", tag="app", responses={200: None}, text="text/html"),
    Route(name="ui_asset", operation_id="ui_file", method="get", path="ui/{file}", params=(UI_FILE,), handler=ui.page,
          public=True, summary="A script or style of the page", tag="app", responses={200: None}, text="text/*",
          problems=(404,)),
    # Agents and their runs
    Route(name="list_agents", method="get", path="agents", handler=agents.list_agents,
          summary="The agents this app serves", tag="agents", responses={200: AgentListBody}),
    Route(name="get_agent", method="get", path="agents/{agent}", params=(AGENT,), handler=agents.get_agent,
          summary="One agent", tag="agents", responses={200: AgentView}, problems=(404,)),
    Route(name="start_run", method="post", path="agents/{agent}/runs", params=(AGENT,), handler=runs.start_run,
          client=True, summary="Start a run (optionally in a session; optionally wait up to wait_seconds)",
          tag="runs", body=StartRunRequest, responses={200: RunView, 202: RunView, 500: RunView},
          problems=(400, 404, 409, 413, 415, 422), idempotent=True),
    Route(name="get_run", method="get", path="runs/{run_id}", params=(RUN,), handler=runs.get_run, client=True,
          summary="Poll a run: what is new since the continuation token (long-poll with wait_seconds)",
          tag="runs", query=PollQuery, responses={200: RunView, 202: RunView, 500: RunView},
          problems=(400, 401, 404, 422)),
    Route(name="cancel_run", method="post", path="runs/{run_id}/cancel", params=(RUN,), handler=runs.cancel_run,
          client=True, summary="Cancel a run", tag="runs", responses={202: CancelAcceptedBody}, problems=(404, 409)),
    Route(name="list_approvals", method="get", path="runs/{run_id}/approvals", params=(RUN,),
          handler=approvals.list_approvals, summary="A run's approvals (optionally by status)", tag="approvals",
          query=ApprovalsQuery, responses={200: ApprovalListBody}, problems=_RUN),
    Route(name="decide_approval", method="post", path="runs/{run_id}/approvals/{approval_id}",
          params=(RUN, APPROVAL), handler=approvals.decide, client=True,
          summary="Approve (optionally with edited arguments) or reject a pending tool call", tag="approvals",
          body=ApprovalDecisionRequest, responses={202: ApprovalView},
          problems=(400, 403, 404, 409, 410, 413, 415, 422)),
    # Sessions
    Route(name="get_session", method="get", path="sessions/{session_id}", params=(SESSION,),
          handler=sessions.get_session, summary="A session and its runs", tag="sessions",
          responses={200: SessionView}, problems=(404,)),
    Route(name="delete_session", method="delete", path="sessions/{session_id}", params=(SESSION,),
          handler=sessions.delete_session, client=True,
          summary="Delete a session with everything in it and purge its runs' Durable history "
          "(?cancel=true: terminate an active run instead of 409)", tag="sessions", query=DeleteSessionQuery,
          responses={204: None}, problems=(404, 409, 422)),
    Route(name="list_session_messages", method="get", path="sessions/{session_id}/messages", params=(SESSION,),
          handler=sessions.list_messages, summary="Page through a session's messages", tag="sessions",
          query=MessagesQuery, responses={200: MessagePageBody}, problems=(400, 401, 404, 422)),
    # Workflows
    Route(name="list_workflows", method="get", path="workflows", handler=workflows.list_workflows,
          summary="The workflows this app serves, with their input schemas", tag="workflows",
          responses={200: WorkflowListBody}),
    Route(name="get_workflow", method="get", path="workflows/{name}", params=(WORKFLOW,),
          handler=workflows.get_workflow, summary="One workflow", tag="workflows",
          responses={200: WorkflowSummary}, problems=(404,)),
    Route(name="start_workflow", method="post", path="workflows/{name}/runs", params=(WORKFLOW,),
          handler=workflows.start_workflow, client=True,
          summary="Start a workflow run (optionally wait up to wait_seconds)", tag="workflows",
          body=StartWorkflowRequest, responses={200: WorkflowRunView, 202: WorkflowRunView, 500: WorkflowRunView},
          problems=(400, 404, 409, 413, 415, 422), idempotent=True),
    Route(name="get_workflow_run", method="get", path="workflows/runs/{run_id}", params=(WORKFLOW_RUN,),
          handler=workflows.get_workflow_run, client=True,
          summary="Poll a workflow run: steps finished since the continuation token, the active step",
          tag="workflows", query=PollQuery,
          responses={200: WorkflowRunView, 202: WorkflowRunView, 500: WorkflowRunView},
          problems=(400, 401, 404, 422)),
    Route(name="cancel_workflow_run", method="post", path="workflows/runs/{run_id}/cancel", params=(WORKFLOW_RUN,),
          handler=workflows.cancel_workflow_run, client=True,
          summary="Cancel a workflow run and its running child runs", tag="workflows",
          responses={202: WorkflowCancelBody}, problems=(404, 409)),
    Route(name="signal_workflow_run", method="post", path="workflows/runs/{run_id}/signals/{name}",
          params=(WORKFLOW_RUN, SIGNAL), handler=workflows.signal_workflow_run, client=True,
          summary="Send a signal (with a payload) to a workflow run", tag="workflows", body=SignalRequest,
          responses={202: SignalAcceptedBody}, problems=(400, 404, 409, 413, 415, 422)),
    # The caller's lists (identities: README "Callers and identities")
    Route(name="list_approval_inbox", method="get", path="approvals", handler=listings.list_inbox,
          summary="Every approval the caller may decide, across runs and workflows (newest first)",
          tag="approvals", query=InboxQuery, responses={200: InboxBody}, problems=(400, 401, 422)),
    Route(name="list_my_runs", method="get", path="runs", handler=listings.list_runs,
          summary="The caller's runs (newest first; by status and agent)", tag="runs", query=RunsQuery,
          responses={200: RunListBody}, problems=(400, 401, 422)),
    Route(name="list_my_sessions", method="get", path="sessions", handler=sessions.list_sessions,
          summary="The caller's sessions (newest first, with last activity)", tag="sessions",
          query=SessionsQuery, responses={200: SessionListBody}, problems=(400, 401, 422)),
    # Live streams (SSE): the handlers take the extension's request and answer with its StreamingResponse
    Route(name="stream_run", method="get", path="runs/{run_id}/stream", params=(RUN,), handler=streams.stream_run,
          client=True, native=True, stream=True,
          summary="Live stream (SSE) of a run: update, delta, status, done events; resumable", tag="runs",
          query=StreamQuery, problems=(400, 401, 404, 422)),
    Route(name="stream_workflow_run", method="get", path="workflows/runs/{run_id}/stream", params=(WORKFLOW_RUN,),
          handler=streams.stream_workflow_run, client=True, native=True, stream=True,
          summary="Live stream (SSE) of a workflow run: steps, status with child runs, done; resumable",
          tag="workflows", query=StreamQuery, problems=(400, 401, 404, 422)),
    # The OpenAI Responses API
    Route(name="create_response", method="post", path="v1/responses", handler=responses.create_response, client=True,
          summary="OpenAI Responses: start a run on the agent named by `model` (or answer its approval requests "
          "with mcp_approval_response items); waits for the turn unless `background`; `stream`: its events",
          tag="openai", body=CreateResponseRequest, responses={200: ResponseObject, **_OPENAI_ERRORS},
          stream=True, openai_events=True),
    Route(name="get_response", method="get", path="v1/responses/{response_id}", params=(RESPONSE,),
          handler=responses.get_response, client=True,
          summary="OpenAI Responses: one response (a turn of a run); `stream=true`: its events, after "
          "`starting_after`", tag="openai", query=RetrieveQuery,
          responses={200: ResponseObject, **_OPENAI_ERRORS}, stream=True, openai_events=True),
    Route(name="delete_response", method="delete", path="v1/responses/{response_id}", params=(RESPONSE,),
          handler=responses.delete_response, client=True,
          summary="OpenAI Responses: delete the conversation (session) the response belongs to", tag="openai",
          responses={200: DeletedResponse, **_OPENAI_ERRORS}),
    Route(name="cancel_response", method="post", path="v1/responses/{response_id}/cancel", params=(RESPONSE,),
          handler=responses.cancel_response, client=True,
          summary="OpenAI Responses: cancel the run behind the response", tag="openai",
          responses={200: ResponseObject, **_OPENAI_ERRORS}),
    Route(name="list_response_input_items", operation_id="list_input_items", method="get",
          path="v1/responses/{response_id}/input_items", params=(RESPONSE,), handler=responses.list_input_items,
          client=True, summary="OpenAI Responses: what the client sent for the response (paged)", tag="openai",
          query=InputItemsQuery, responses={200: InputItemList, **_OPENAI_ERRORS}),
))
