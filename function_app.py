"""The Functions app: wiring only. Routes -> `http_api` handlers; the `agent_run` and `workflow` orchestrators and
their activities.

Runs on Azure Functions (Durable extension), `func start` on a laptop, and devhost (`python -m devhost`).
"""

import azure.durable_functions as df
import azure.functions as func
from azurefunctions.extensions.http.fastapi import Request, StreamingResponse

from activities import workflow_agents, workflow_finish, workflow_gates, workflow_steps
from activities.approvals import apply_decisions, escalate_approvals, expire_approvals, record_approvals
from activities.finish import finish_run
from activities.mcp import discover_tools
from activities.model import call_model
from activities.queue import take_turn
from activities.run_middleware import run_middleware_before
from activities.tools import invoke_tool
from agent_runs.services import RunServices
from http_api import agents, approvals, fastapi_bridge, listings, openapi, runs, sessions, workflows
from http_api.openai_responses import handlers as responses
from http_api.streams import handlers as streams
from http_api.ui import serve as ui
from orchestrators.agent_run import agent_run
from orchestrators.workflow import workflow
from telemetry import configure_telemetry
from workflow_runtime.registry import load_workflows

configure_telemetry()  # OpenTelemetry from the environment, once per process (devhost workers import the app too)
# DFApp with every route bridged to azurefunctions-extensions-http-fastapi, which the streams need (see the module)
app = fastapi_bridge.DFApp(http_auth_level=func.AuthLevel.FUNCTION)

# ----------------------------------------------------------------------------------------------- orchestration
app.orchestration_trigger(context_name="context")(agent_run)
for activity in (
    call_model, invoke_tool, record_approvals, apply_decisions, expire_approvals, escalate_approvals, finish_run
):
    app.activity_trigger(input_name="payload")(activity)
app.activity_trigger(input_name="payload")(discover_tools)  # MCP tools, listed once per run
run_middleware_before.register(app)


# ----------------------------------------------------------------------------------------------- HTTP: agents
@app.route(route="health", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
async def health(req: func.HttpRequest) -> func.HttpResponse:
    return await agents.health(req)


@app.route(route="openapi.json", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
async def openapi_document(req: func.HttpRequest) -> func.HttpResponse:
    return await openapi.serve_openapi(req)


@app.route(route="agents", methods=["GET"])
async def list_agents(req: func.HttpRequest) -> func.HttpResponse:
    return await agents.list_agents(req)


@app.route(route="agents/{agent}", methods=["GET"])
async def get_agent(req: func.HttpRequest) -> func.HttpResponse:
    return await agents.get_agent(req)


# ----------------------------------------------------------------------------------------------- HTTP: runs
@app.route(route="agents/{agent}/runs", methods=["POST"])
@app.durable_client_input(client_name="client")
async def start_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    return await runs.start_run(req, client)


@app.route(route="runs/{run_id}", methods=["GET"])
@app.durable_client_input(client_name="client")
async def get_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    return await runs.get_run(req, client)


@app.route(route="runs/{run_id}/cancel", methods=["POST"])
@app.durable_client_input(client_name="client")
async def cancel_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    return await runs.cancel_run(req, client)


@app.route(route="runs/{run_id}/approvals", methods=["GET"])
async def list_approvals(req: func.HttpRequest) -> func.HttpResponse:
    return await approvals.list_approvals(req)


@app.route(route="runs/{run_id}/approvals/{approval_id}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def decide_approval(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    return await approvals.decide(req, client)


# ----------------------------------------------------------------------------------------------- HTTP: sessions
@app.route(route="sessions/{session_id}", methods=["GET"])
async def get_session(req: func.HttpRequest) -> func.HttpResponse:
    return await sessions.get_session(req)


@app.route(route="sessions/{session_id}", methods=["DELETE"])
@app.durable_client_input(client_name="client")
async def delete_session(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    return await sessions.delete_session(req, client)


@app.route(route="sessions/{session_id}/messages", methods=["GET"])
async def list_session_messages(req: func.HttpRequest) -> func.HttpResponse:
    return await sessions.list_messages(req)


# ----------------------------------------------------------------------------------------------- workflows
load_workflows(RunServices.current().agents.names())  # definitions are checked at start-up, against the agents
app.orchestration_trigger(context_name="context")(workflow)
for workflow_activity in (
    workflow_agents.workflow_start_agents,
    workflow_agents.workflow_record_agents,
    workflow_agents.workflow_flag_children_cancelled,
    workflow_steps.workflow_call_function,
    workflow_steps.workflow_evaluate,
    workflow_steps.workflow_resolve_time,
    workflow_steps.workflow_record_delay,
    workflow_steps.workflow_record_signal,
    workflow_steps.workflow_find_signal,
    workflow_gates.workflow_open_gate,
    workflow_gates.workflow_expire_gate,
    workflow_gates.workflow_record_gate,
    workflow_finish.workflow_finish,
):
    app.activity_trigger(input_name="payload")(workflow_activity)


@app.route(route="workflows", methods=["GET"])
async def list_workflows(req: func.HttpRequest) -> func.HttpResponse:
    return await workflows.list_workflows(req)


@app.route(route="workflows/{name}", methods=["GET"])
async def get_workflow(req: func.HttpRequest) -> func.HttpResponse:
    return await workflows.get_workflow(req)


@app.route(route="workflows/{name}/runs", methods=["POST"])
@app.durable_client_input(client_name="client")
async def start_workflow(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    return await workflows.start_workflow(req, client)


@app.route(route="workflows/runs/{run_id}", methods=["GET"])
@app.durable_client_input(client_name="client")
async def get_workflow_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    return await workflows.get_workflow_run(req, client)


@app.route(route="workflows/runs/{run_id}/cancel", methods=["POST"])
@app.durable_client_input(client_name="client")
async def cancel_workflow_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    return await workflows.cancel_workflow_run(req, client)


@app.route(route="workflows/runs/{run_id}/signals/{name}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def signal_workflow_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    return await workflows.signal_workflow_run(req, client)


# ----------------------------------------------------------------------------------------------- queued runs
app.activity_trigger(input_name="payload")(take_turn)  # a queued run asks for its turn (orchestrators.queue_wait)


# ----------------------------------------------------------------------------------------------- the caller's lists
@app.route(route="approvals", methods=["GET"])
async def list_approval_inbox(req: func.HttpRequest) -> func.HttpResponse:
    return await listings.list_inbox(req)


@app.route(route="runs", methods=["GET"])
async def list_my_runs(req: func.HttpRequest) -> func.HttpResponse:
    return await listings.list_runs(req)


@app.route(route="sessions", methods=["GET"])
async def list_my_sessions(req: func.HttpRequest) -> func.HttpResponse:
    return await sessions.list_sessions(req)


# ----------------------------------------------------------------------------------------------- HTTP: the page
@app.route(route="ui", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
async def ui_page(req: func.HttpRequest) -> func.HttpResponse:
    return await ui.page(req)


@app.route(route="ui/{file}", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
async def ui_asset(req: func.HttpRequest) -> func.HttpResponse:
    return await ui.page(req)


# ----------------------------------------------------------------------------------------------- live streams (SSE)
@app.route(route="runs/{run_id}/stream", methods=["GET"])
@app.durable_client_input(client_name="client")
async def stream_run(req: Request, client: df.DurableOrchestrationClient) -> StreamingResponse:
    return await streams.stream_run(req, client)


@app.route(route="workflows/runs/{run_id}/stream", methods=["GET"])
@app.durable_client_input(client_name="client")
async def stream_workflow_run(req: Request, client: df.DurableOrchestrationClient) -> StreamingResponse:
    return await streams.stream_workflow_run(req, client)


# ----------------------------------------------------------------------------------------------- OpenAI Responses API
# These two may stream (`stream`): they take the extension's Request and answer a stream or a plain response.
@app.route(route="v1/responses", methods=["POST"])
@app.durable_client_input(client_name="client")
async def create_response(req: Request, client: df.DurableOrchestrationClient) -> StreamingResponse:
    return await fastapi_bridge.serve(responses.create_response, req, client)


@app.route(route="v1/responses/{response_id}", methods=["GET"])
@app.durable_client_input(client_name="client")
async def get_response(req: Request, client: df.DurableOrchestrationClient) -> StreamingResponse:
    return await fastapi_bridge.serve(responses.get_response, req, client)


@app.route(route="v1/responses/{response_id}", methods=["DELETE"])
@app.durable_client_input(client_name="client")
async def delete_response(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    return await responses.delete_response(req, client)


@app.route(route="v1/responses/{response_id}/cancel", methods=["POST"])
@app.durable_client_input(client_name="client")
async def cancel_response(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    return await responses.cancel_response(req, client)


@app.route(route="v1/responses/{response_id}/input_items", methods=["GET"])
@app.durable_client_input(client_name="client")
async def list_response_input_items(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    return await responses.list_input_items(req, client)
