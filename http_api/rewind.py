"""`POST /api/runs/{run_id}/rewind`: a failed run goes on from the step that failed, as the same run.

The orchestration that failed says where it can go on from (`RunOutcome.resume`: the loop's state from just before
the failed step, positions after everything the run wrote). A rewind reopens the run in the store - the session's
active run again, the rewind recorded with who, when and from which step - then starts the `agent_run`
orchestration again under the run's id with that input. Completed model and tool calls are in the loop's state and
the store, so they are not made again; decided approvals stay decided; continuation tokens and streams of the run
stay valid, because it is the same run and its new messages come after everything it wrote.

A workflow run rewinds the same way (`POST /api/workflows/runs/{run_id}/rewind`): its failed step runs again, as a
new attempt with keys of its own (new child runs, a new gate), and the steps before it keep their results.

Races: the store's reopen is conditional, so of two rewinds sent at once exactly one reopens the run and starts its
continuation (the other gets 409). A host that dies between the reopen and the start (or, on Cosmos, between the
reopen's two writes: the run, then its session's claim) leaves the run open with a finished orchestration: a rewind
sent again sees that, completes the claim and starts the continuation (`_interrupted`); if a new run took the session
meanwhile, the run is failed again and the rewind gets 409 `run_not_latest`.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import azure.durable_functions as df
import azure.functions as func
from pydantic import BaseModel, Field, ValidationError

from agent_runs.contracts import ResumePoint
from agent_runs.services import RunServices
from http_api.adapter import http_endpoint, json_response
from http_api.caller import current_principal
from http_api.durable_gateway import STILL_RUNNING, DurableGateway, OrchestrationState
from http_api.models import RunLinks
from http_api.problems import ApiProblem, not_found
from http_api.purge import discard_instance
from http_api.refusals import read_refusal
from http_api.request_context import base_url
from http_api.run_views import links
from http_api.runs import is_workflow_run, run_or_404
from http_api.workflow_gateway import WorkflowGateway
from session_store import RunNotReopenableError, RunRecord, SessionBusyError
from workflow_runtime.contracts import WorkflowInput

ResumeT = TypeVar("ResumeT", ResumePoint, WorkflowInput)


class RewindRecord(BaseModel):
    """What the run keeps of each rewind (`RunRecord.rewinds`)."""

    rewind_id: str
    by: str
    by_name: str | None = None
    at: datetime
    from_step: str = Field(description="an agent run's step kind (call_model, ...), a workflow run's step id")
    iteration: int = Field(description="an agent run's loop iteration, a workflow step's attempt")
    error_code: str | None = Field(default=None, description="the code of the failure it went on from")


class RewindAcceptedBody(BaseModel):
    run_id: str
    status: Literal["in_progress"]
    rewind: RewindRecord
    links: RunLinks


@dataclass(frozen=True)
class ResumeFrom:
    """Where a failed run goes on from, whatever its kind: the step (for the record) and how to start it again."""

    step: str
    iteration: int
    start: Callable[[], Awaitable[None]]


@http_endpoint
async def rewind_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    services = RunServices.current()
    run = await run_or_404(services.store, req.route_params["run_id"])  # the owner's rule, as for cancel
    if is_workflow_run(run):
        raise ApiProblem(
            409, "run_is_a_workflow", "This run is a workflow run",
            f"Rewind it at /api/workflows/runs/{run.run_id}/rewind.", field="path.run_id",
        )
    gateway = DurableGateway(client)
    state = await gateway.state(run.run_id)
    return await _rewind(req, client, services, run, _agent_resume(gateway, state), ending=_ending(state))


@http_endpoint
async def rewind_workflow_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    services = RunServices.current()
    run = await run_or_404(services.store, req.route_params["run_id"])
    if not is_workflow_run(run):
        raise not_found("workflow_run_not_found", "Workflow run", run.run_id, field="path.run_id")
    gateway = WorkflowGateway(client)
    state = await gateway.state(run.run_id)
    return await _rewind(req, client, services, run, _workflow_resume(gateway, state), ending=_ending(state))


async def _rewind(
    req: func.HttpRequest,
    client: df.DurableOrchestrationClient,
    services: RunServices,
    run: RunRecord,
    resume: ResumeFrom | None,
    *,
    ending: bool,
) -> func.HttpResponse:
    # Read again, after the orchestration's state (`resume`): a record read before it may be of a rewind whose
    # continuation has failed since, which would pass for an interrupted rewind of that newer failure. A rewind more
    # than at the first read was made meanwhile by another request, whose continuation the state read before it
    # cannot show: this request lost that race, as it would have lost the reopen.
    current = await run_or_404(services.store, run.run_id)
    if len(current.rewinds) > len(run.rewinds):
        raise _another_rewind_first()
    run = current
    if resume is not None and _interrupted(run):
        record = RewindRecord.model_validate(run.rewinds[-1])
        run = await _claim(services, run, run.rewinds[-1])  # the session's claim may be what the host did not write
    else:
        record, run, resume = await _reopen(services, run, resume, ending=ending)
    await resume.start()
    await _unless_deleted(client, services, run)
    run_links = links(base_url(req), run)
    if is_workflow_run(run):
        workflow = f"{base_url(req)}/api/workflows/runs/{run.run_id}"
        run_links = run_links.model_copy(update={"self": workflow, "cancel": f"{workflow}/cancel"})
    body = RewindAcceptedBody(run_id=run.run_id, status="in_progress", rewind=record, links=run_links)
    response = json_response(body.model_dump(mode="json"), status=202)
    response.headers["Location"] = body.links.self
    return response


async def _unless_deleted(client: df.DurableOrchestrationClient, services: RunServices, run: RunRecord) -> None:
    """A session delete that ran between the reopen and the start found no orchestration to stop and purged the old
    one's history: the continuation just started would run for a deleted run and keep its history. It goes, and the
    rewind answers as for any deleted run."""
    if await services.store.get_run(run.run_id, session_id=run.session_id) is not None:
        return
    await discard_instance(client, run.run_id)
    raise not_found("run_not_found", "Run", run.run_id, field="path.run_id")


def _ending(state: OrchestrationState[Any] | None) -> bool:
    """The failed run's orchestration has not completed: it still records the run's end (its notifications), and
    says where it can go on from only once it completes."""
    return state is not None and state.runtime_status in STILL_RUNNING


def _agent_resume(gateway: DurableGateway, state: OrchestrationState[Any] | None) -> ResumeFrom | None:
    resume = _finished_output(state, ResumePoint)
    if resume is None:
        return None
    # A fresh history: its steps wait out a store outage, whenever the failed run started (`RunInput`).
    run_input = resume.input.model_copy(update={"steps_wait_out_outages": True})
    return ResumeFrom(step=resume.step, iteration=resume.iteration, start=lambda: _launch(
        lambda: gateway.start_run(run_input), lambda: gateway.state(run_input.run.run_id)
    ))


def _workflow_resume(gateway: WorkflowGateway, state: OrchestrationState[Any] | None) -> ResumeFrom | None:
    resume = _finished_output(state, WorkflowInput)
    if resume is None or state is None:
        return None
    failed_step = str(state.output.get("failed_step") or "")
    # A fresh history: its steps outlast a store outage, whenever the failed workflow started (`WorkflowRef`).
    resumed = resume.model_copy(update={"ref": resume.ref.model_copy(update={"steps_outlast_store_outages": True})})
    return ResumeFrom(step=failed_step, iteration=resume.state.attempts.get(failed_step, 0), start=lambda: _launch(
        lambda: gateway.start(resumed), lambda: gateway.state(resumed.ref.run_id)
    ))


def _finished_output(state: OrchestrationState[Any] | None, model: type[ResumeT]) -> ResumeT | None:
    """The resume point the failed orchestration returned; None while it runs or when it had none."""
    if state is None or state.runtime_status != "Completed" or not isinstance(state.output, dict):
        return None
    resume = state.output.get("resume")
    if resume is None:
        return None
    try:
        return model.model_validate(resume)
    except ValidationError:
        return None


def _another_rewind_first() -> ApiProblem:
    return ApiProblem(
        409, "run_not_failed", "Only a failed run can be rewound", "Another rewind of this run started first.",
        field="path.run_id",
    )


def _interrupted(run: RunRecord) -> bool:
    """Given that its orchestration is the failed one that finished (it has a resume point): a rewind reopened the
    run but its continuation never started (the host died in between)."""
    return not run.finished and bool(run.rewinds)


async def _reopen(
    services: RunServices, run: RunRecord, resume: ResumeFrom | None, *, ending: bool
) -> tuple[RewindRecord, RunRecord, ResumeFrom]:
    if run.status != "failed":
        raise ApiProblem(
            409, "run_not_failed", "Only a failed run can be rewound",
            f"The run is {run.status}.", field="path.run_id",
        )
    if resume is None and ending:
        raise ApiProblem(
            409, "run_still_ending", "The run is still ending",
            "It failed, but its orchestration has not completed yet (it records the run's end: notifications wait "
            "for the store). Try again shortly.", field="path.run_id",
        )
    if resume is None:
        raise ApiProblem(
            409, "run_not_rewindable", "The run cannot be rewound",
            "It did not fail in a step that can be repeated (e.g. it failed while waiting for approvals, or its "
            "orchestration crashed). Fork it to try again from its input: POST /api/runs/{run_id}/fork.",
            field="path.run_id",
        )
    caller = current_principal()
    record = RewindRecord(
        rewind_id=uuid.uuid4().hex,
        by=caller.id,
        by_name=caller.name,
        at=datetime.now(UTC),
        from_step=resume.step,
        iteration=resume.iteration,
        error_code=str((run.error or {}).get("code") or "failed"),  # the code only: messages may hold internals
    )
    # Only the run as read after `resume`: another rewind may have reopened it since, and its continuation failed
    # again - further on, where `resume` (of the failure before) would go back to.
    reopened = await _claim(services, run, record.model_dump(mode="json"), after_rewinds=len(run.rewinds))
    return record, reopened, resume


async def _claim(
    services: RunServices, run: RunRecord, rewind: dict[str, Any], after_rewinds: int | None = None
) -> RunRecord:
    """The run reopened by `rewind` and holding its session (the same `rewind` again completes an interrupted one)."""
    try:
        return await services.store.reopen_run(run.run_id, rewind, after_rewinds=after_rewinds)
    except RunNotReopenableError as refused:
        if refused.reason == "not_latest":
            raise _not_latest(run) from refused
        raise _another_rewind_first() from refused
    except SessionBusyError as busy:
        raise _not_latest(run) from busy


def _not_latest(run: RunRecord) -> ApiProblem:
    return ApiProblem(
        409, "run_not_latest", "Only the latest run of a session can be rewound",
        "Later runs of its session came after it. Fork it instead (POST /api/runs/{run_id}/fork): a new session "
        "with the conversation up to this run.", field="path.run_id", fork=f"/api/runs/{run.run_id}/fork",
    )


async def _launch(
    start: Callable[[], Awaitable[None]], state: Callable[[], Awaitable[OrchestrationState[Any] | None]]
) -> None:
    """Start the continuation; a start that finds it already running (a concurrent repair) is as good."""
    try:
        await start()
    except Exception:
        if not (await read_refusal(state)).running:
            raise
