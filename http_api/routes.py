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

from agent_runs.transcript import Transcript
from http_api import (
    agents,
    approvals,
    fallback,
    fork,
    listings,
    rewind,
    route_functions,
    runs,
    sessions,
    transcript,
    workflows,
)
from http_api.adapter import http_endpoint
from http_api.agents import AgentView
from http_api.approvals import ApprovalsQuery, ApprovalView
from http_api.caller import public
from http_api.listings import InboxBody, InboxQuery, RunListBody, RunsQuery
from http_api.models import ApprovalDecisionRequest, RunView, StartRunRequest
from http_api.openai_responses import handlers as responses
from http_api.openai_responses import model_list
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
from notifications.http import deliveries, slack
from notifications.http.page import routes as decision_page


def register(app: df.DFApp) -> None:
    route_functions.register(app, (*ROUTES, *FALLBACK))


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
SESSION = PathParam(name="session_id", not_found="session_not_found", noun="Session", session=True)
WORKFLOW = PathParam(name="name", not_found="workflow_not_found", noun="Workflow")
WORKFLOW_RUN = PathParam(name="run_id", not_found="workflow_run_not_found", noun="Workflow run")
SIGNAL = PathParam(name="name", not_found="signal_not_found", noun="Signal")
UI_FILE = PathParam(name="file", not_found="ui_file_not_found", noun="File")
RESPONSE = PathParam(name="response_id", not_found="response_not_found", noun="Response")
MODEL = PathParam(name="model", not_found="model_not_found", noun="Model", pattern=r"[A-Za-z0-9_-]{1,64}")
ANY_PATH = PathParam(name="*path", not_found="route_not_found", noun="Route", pattern=".*")
DELIVERY = PathParam(name="event_id", not_found="delivery_not_found", noun="Delivery")

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
    Route(name="ui_decision_page", method="get", path="ui/approvals/{approval_id}", params=(APPROVAL,),
          handler=decision_page.decision_page, public=True, tag="app", responses={200: None}, text="text/html",
          summary="The decision page of one approval (a signed link from a notification; deciding needs sign-in)",
          problems=(403, 404)),
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
    Route(name="rewind_run", method="post", path="runs/{run_id}/rewind", params=(RUN,), handler=rewind.rewind_run,
          client=True, summary="Rewind a failed run: the same run goes on from the step that failed", tag="runs",
          responses={202: rewind.RewindAcceptedBody}, problems=(404, 409)),
    Route(name="fork_run", method="post", path="runs/{run_id}/fork", params=(RUN,), handler=fork.fork_run,
          client=True, summary="Fork a run: a new session with the conversation before it, and a run there (its "
          "input again, or a new one)", tag="runs", body=fork.ForkRequest,
          responses={200: RunView, 202: RunView, 500: RunView}, problems=(400, 404, 409, 413, 415, 422),
          idempotent=True),
    Route(name="get_transcript", method="get", path="runs/{run_id}/transcript", params=(RUN,),
          handler=transcript.get_transcript, summary="What the run did (model calls, tool calls, decisions): save it "
          "and replay it as a test", tag="runs", responses={200: Transcript}, problems=(404, 409)),
    Route(name="list_approvals", method="get", path="runs/{run_id}/approvals", params=(RUN,),
          handler=approvals.list_approvals, summary="A run's approvals (optionally by status)", tag="approvals",
          query=ApprovalsQuery, responses={200: ApprovalListBody}, problems=_RUN),
    Route(name="decide_approval", method="post", path="runs/{run_id}/approvals/{approval_id}",
          params=(RUN, APPROVAL), handler=approvals.decide, client=True,
          summary="Approve (optionally with edited arguments) or reject a pending tool call", tag="approvals",
          body=ApprovalDecisionRequest, responses={202: ApprovalView},
          problems=(400, 403, 404, 409, 410, 413, 415, 422)),
    Route(name="approval_context", method="get", path="runs/{run_id}/approvals/{approval_id}/context",
          params=(RUN, APPROVAL), handler=decision_page.approval_context,
          summary="One approval with what its approver needs to decide (the run's last messages)", tag="approvals",
          responses={200: decision_page.ApprovalContext}, problems=(404,)),
    # Notifications (notifications/): the run's delivery log, and sending an event again
    Route(name="list_deliveries", method="get", path="runs/{run_id}/deliveries", params=(RUN,),
          handler=deliveries.list_deliveries, summary="A run's notification deliveries and their attempts",
          tag="runs", responses={200: deliveries.DeliveryLogBody}, problems=(404,)),
    Route(name="redeliver", method="post", path="runs/{run_id}/deliveries/{event_id}/redeliver",
          params=(RUN, DELIVERY), handler=deliveries.redeliver, client=True,
          summary="Send a notification again (the same webhook-id)", tag="runs",
          responses={202: deliveries.RedeliveryAccepted}, problems=(404,)),
    Route(name="slack_interactions", method="post", path="integrations/slack/interactions",
          handler=slack.slack_interactions, client=True, public=True, tag="approvals",
          summary="Slack's Approve / Reject buttons (verified by Slack's request signature; Slack users mapped to "
          "approvers by SLACK_APPROVERS)", responses={200: None}, problems=(400, 401, 413)),
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
    Route(name="rewind_workflow_run", method="post", path="workflows/runs/{run_id}/rewind", params=(WORKFLOW_RUN,),
          handler=rewind.rewind_workflow_run, client=True, summary="Rewind a failed workflow run: its failed step "
          "runs again, the steps before it keep their results", tag="workflows",
          responses={202: rewind.RewindAcceptedBody}, problems=(404, 409)),
    Route(name="cancel_workflow_run", method="post", path="workflows/runs/{run_id}/cancel", params=(WORKFLOW_RUN,),
          handler=workflows.cancel_workflow_run, client=True,
          summary="Cancel a workflow run and its running child runs", tag="workflows",
          responses={202: WorkflowCancelBody}, problems=(404, 409)),
    Route(name="signal_workflow_run", method="post", path="workflows/runs/{run_id}/signals/{name}",
          params=(WORKFLOW_RUN, SIGNAL), handler=workflows.signal_workflow_run, client=True,
          summary="Send a signal (with a payload) to a workflow run", tag="workflows", body=SignalRequest,
          responses={202: SignalAcceptedBody}, problems=(400, 404, 409, 413, 415, 422), idempotent=True),
    # The caller's lists (identities: docs/identity.md)
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
    Route(name="list_models", method="get", path="v1/models", handler=model_list.list_models,
          summary="OpenAI Models: the agents this app serves (a model is an agent)", tag="openai",
          responses={200: model_list.ModelList, **_OPENAI_ERRORS}),
    Route(name="get_model", method="get", path="v1/models/{model}", params=(MODEL,), handler=model_list.get_model,
          summary="OpenAI Models: one agent, as a model", tag="openai",
          responses={200: model_list.ModelObject, **_OPENAI_ERRORS}),
))

# Every other path and method: a 404 in the error shape of the API it belongs to (`http_api.fallback`: why it never
# shadows a route above). Registered, not documented: it is no operation.
FALLBACK: tuple[Route, ...] = check_table(
    Route(name=f"unknown_route_{method}", method=method, path="{*path}", params=(ANY_PATH,),
          handler=fallback.unknown_route, public=True, summary="No such route", tag="app", problems=(404,))
    for method in ("get", "post", "delete", "put", "patch")
)
