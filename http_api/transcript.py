"""`GET /api/runs/{run_id}/transcript`: what a run did, to save (`agentctl export`) and replay as a test."""

from __future__ import annotations

import azure.functions as func

from agent_runs.run_tools import agent_for_run
from agent_runs.sequence import run_seq_range
from agent_runs.services import RunServices
from agent_runs.store_log import load_session_records
from agent_runs.transcript import build_transcript
from http_api.adapter import http_endpoint, json_response
from http_api.problems import ApiProblem
from http_api.runs import agent_or_404, is_workflow_run, run_or_404


@http_endpoint
async def get_transcript(req: func.HttpRequest) -> func.HttpResponse:
    services = RunServices.current()
    store = services.store
    run = await run_or_404(store, req.route_params["run_id"])  # the owner's, as the run itself
    if is_workflow_run(run):
        raise ApiProblem(404, "run_is_a_workflow", "This run is a workflow run",
                         "A workflow run has no transcript of its own: export the agent runs of its steps.",
                         field="path.run_id")
    if run.ordinal == 0:
        raise ApiProblem(409, "run_not_started", "The run has not started",
                         "A queued run has no place in its conversation yet.", field="path.run_id")
    agent = await agent_for_run(store, agent_or_404(services, run.agent), run.run_id)
    _, last = run_seq_range(run.ordinal)
    records = await load_session_records(store, run.session_id, up_to_seq=last)
    approvals = await store.list_approvals(run_id=run.run_id)
    transcript = build_transcript(agent, run, records, approvals)
    return json_response(transcript.model_dump(mode="json"))
