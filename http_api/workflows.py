"""Workflows over HTTP: list definitions, start a run, poll it (continuation tokens, long-poll), signal, cancel.

Approvals of workflow gates go through the run approval routes with the workflow run id
(`GET /api/runs/{run_id}/approvals`, `POST /api/runs/{run_id}/approvals/{approval_id}`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

import azure.durable_functions as df
import azure.functions as func
from pydantic import BaseModel, ValidationError

from agent_runs.services import RunServices
from http_api import idempotency
from http_api.access import owns
from http_api.adapter import http_endpoint, json_response, query_model, read_json_body
from http_api.caller import current_principal
from http_api.identity import Principal
from http_api.polling import PollQuery, view_response
from http_api.problems import ApiProblem, not_found, validation_problem
from http_api.refusals import read_refusal
from http_api.request_context import base_url
from http_api.run_lifecycle import cancel, claim_start, create_and_start, open_run_session, poll_cursor, wait_for_view
from http_api.start_webhook import start_webhook
from http_api.workflow_doorbells import repair_waiting
from http_api.workflow_gateway import WorkflowGateway, WorkflowState
from http_api.workflow_models import (
    FINAL_WORKFLOW_STATUSES,
    SignalRequest,
    StartWorkflowRequest,
    StepSummary,
    WorkflowRunView,
    WorkflowSummary,
)
from http_api.workflow_signals import QueuedSignal, accepted_before, append_once
from http_api.workflow_views import TOKEN_SCOPE, build_workflow_view, workflow_name
from notifications.http.webhook_field import checked_webhook
from notifications.starting import prepare_notifications
from session_store import CLIENT_CANCEL_REASON, WORKFLOW_CANCEL_REASON, RunRecord, SessionRecord
from telemetry.trace_context import RunTrace
from workflow_runtime.contracts import WORKFLOW_AGENT_PREFIX, WorkflowInput, WorkflowRef, control_session_id
from workflow_runtime.definition import WorkflowDefinition
from workflow_runtime.registry import UnknownWorkflowError, WorkflowRegistry, load_workflows, workflows_package

log = logging.getLogger(__name__)


def _registry(services: RunServices) -> WorkflowRegistry:
    return load_workflows(services.agents.names())


def _definition_or_404(services: RunServices, name: str) -> WorkflowDefinition:
    try:
        return _registry(services).get(name)
    except UnknownWorkflowError as error:
        raise ApiProblem(404, "workflow_not_found", "Workflow not found", str(error), field="path.name") from error


async def _workflow_run_or_404(services: RunServices, run_id: str) -> RunRecord:
    # A workflow run is always in its control session (`_begin_workflow_run`): read there, without the lookup read;
    # any other run is not found there, a 404 as before.
    record = await services.store.get_run(run_id, session_id=control_session_id(run_id))
    if record is None or workflow_name(record) is None or not owns(current_principal(), record.owner_id):
        raise not_found("workflow_run_not_found", "Workflow run", run_id, field="path.run_id")
    return record


def summary(definition: WorkflowDefinition) -> WorkflowSummary:
    return WorkflowSummary(
        name=definition.name,
        description=definition.description,
        input_schema=definition.input_schema(),
        session_agent=definition.session_agent,
        signals=sorted(definition.signal_names()),
        steps=[StepSummary(id=s.id, kind=getattr(s, "kind", "step"), title=s.title) for s in definition.all_steps()],
    )


@http_endpoint
async def list_workflows(req: func.HttpRequest) -> func.HttpResponse:
    registry = _registry(RunServices.current())
    return json_response({"workflows": [summary(d).model_dump(mode="json") for d in registry.all()]})


@http_endpoint
async def get_workflow(req: func.HttpRequest) -> func.HttpResponse:
    return json_response(summary(_definition_or_404(RunServices.current(), req.route_params["name"])))


@http_endpoint
async def start_workflow(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    services = RunServices.current()
    definition = _definition_or_404(services, req.route_params["name"])
    body = read_json_body(req, StartWorkflowRequest)
    try:
        workflow_input = definition.input_model.model_validate(body.input)
    except ValidationError as error:
        raise validation_problem(error, prefix="body.input") from error
    gateway = WorkflowGateway(client)
    start = await claim_start(req, services.store, f"workflows/{definition.name}", body, gateway)
    webhook = await start_webhook(start, partial(checked_webhook, body.webhook))  # after the key, as `runs.start_run`
    replay, run_id = start.replay, start.run_id

    async def create() -> RunRecord:
        if start.written is not None:  # written by an earlier request that never started it
            return start.written
        return await _begin_workflow_run(services, definition, body, workflow_input, run_id, current_principal())

    async def launch(record: RunRecord, submitting: Callable[[], None]) -> None:
        package = workflows_package()
        if package is None:  # pragma: no cover - a definition was found, so a package is served
            raise RuntimeError("workflow definitions found without a workflows package")
        ref = WorkflowRef(
            run_id=run_id, workflow=definition.name, package=package, session_id=record.metadata.get("session_id"),
            trace=RunTrace.start(req.headers), looks_continue=True, fails_fast=True, reads_record_first=True,
            outlasts_store_outages=True, steps_outlast_store_outages=True,
        ).notifying(await prepare_notifications(services.store, record, webhook))
        submitting()
        await gateway.start(WorkflowInput(ref=ref))
        await _ring_an_early_cancel(services, gateway, run_id)

    caller = current_principal()
    planned = start.written or RunRecord(run_id=run_id, session_id=control_session_id(run_id), agent=definition.name,
                                         kind="workflow", owner_id=caller.id, owner_name=caller.name)
    record = replay or await create_and_start(
        services.store, planned, create, launch, on_unclaimed=start.release, orchestrations=gateway
    )
    view = await _wait_for_view(services, gateway, record, None, body.wait_seconds, req, return_on_updates=False)
    return _response(view)


async def _ring_an_early_cancel(services: RunServices, gateway: WorkflowGateway, run_id: str) -> None:
    """Tell the workflow just started of a cancel flagged before it existed (its event found no instance): unlike an
    agent run's first model call, a workflow's first wait (a delay, signal or gate) does not read the flag. Best
    effort: the orchestration runs, so a failure here must not fail the start; a poll shows it `cancelling`."""
    try:
        record = await services.store.get_run(run_id, session_id=control_session_id(run_id))
        if record is not None and record.cancel_requested_at is not None:
            await gateway.send_cancel(run_id, CLIENT_CANCEL_REASON)
    except Exception as error:
        log.warning("could not tell workflow %s of its early cancel: %s", run_id, error)


async def _begin_workflow_run(
    services: RunServices,
    definition: WorkflowDefinition,
    body: StartWorkflowRequest,
    workflow_input: BaseModel,
    run_id: str,
    caller: Principal,
) -> RunRecord:
    """The workflow's conversation session (if any), its control session and its run record, owned by the caller."""
    session_id = await _conversation_session(services, definition, body.session_id)
    store = services.store
    control = control_session_id(run_id)
    # The control session is new (named after the run id made up by this request): created already held by the
    # run, one write, instead of created and then claimed (a run read, a session read and a replace).
    fresh = SessionRecord(
        session_id=control,
        agent=f"{WORKFLOW_AGENT_PREFIX}{definition.name}",
        metadata={"workflow_run_id": run_id},
        owner_id=caller.id,
        owner_name=caller.name,
    )
    return await store.begin_run(
        RunRecord(
            run_id=run_id,
            session_id=control,
            agent=definition.name,
            kind="workflow",
            instance_id=run_id,
            owner_id=caller.id,
            owner_name=caller.name,
            metadata={
                "workflow": definition.name,
                "input": workflow_input.model_dump(mode="json"),
                "session_id": session_id,
            },
        ),
        new_session=fresh,
    )


async def _conversation_session(
    services: RunServices, definition: WorkflowDefinition, session_id: str | None
) -> str | None:
    if definition.session_agent is None:
        if session_id is not None:
            raise ApiProblem(
                422,
                "workflow_has_no_session",
                "This workflow does not continue a conversation",
                f"Workflow '{definition.name}' runs its agents in sessions of their own; omit session_id.",
                field="body.session_id",
            )
        return None
    return await open_run_session(services.store, session_id, services.agents.get(definition.session_agent))


@http_endpoint
async def get_workflow_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    services = RunServices.current()
    record = await _workflow_run_or_404(services, req.route_params["run_id"])
    query = query_model(req, PollQuery)
    cursor = poll_cursor(services, query.continuation_token, TOKEN_SCOPE, record.run_id)
    view = await _wait_for_view(services, WorkflowGateway(client), record, cursor, query.wait_seconds, req)
    return _response(view)


@http_endpoint
async def cancel_workflow_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    """Cancel the workflow and its running child runs (each gets the same graceful cancel as `/api/runs/.../cancel`)."""
    services = RunServices.current()
    record = await _workflow_run_or_404(services, req.route_params["run_id"])
    if record.finished:
        raise _finished(record)
    finished, children = await cancel_workflow(services, WorkflowGateway(client), record)
    if finished is not None:  # it finished while the cancel was being sent
        raise _finished(finished)
    return json_response({"run_id": record.run_id, "status": "cancelling", "cancelled_child_runs": children}, 202)


def _finished(record: RunRecord) -> ApiProblem:
    return ApiProblem(409, "workflow_finished", "The workflow has already finished", f"It is {record.status}.")


async def cancel_workflow(
    services: RunServices, gateway: WorkflowGateway, record: RunRecord
) -> tuple[RunRecord | None, list[str]]:
    """Flag and signal the cancel of a workflow run, then of its running child runs. Returns the workflow as it ended
    if it finished before the cancel reached it (then nothing was cancelled), and the children cancelled."""
    finished = await cancel(services.store, gateway, record, CLIENT_CANCEL_REASON)
    if finished is not None:
        return finished, []
    return None, await _cancel_children(services, gateway, record.run_id)


async def _cancel_children(services: RunServices, gateway: WorkflowGateway, run_id: str) -> list[str]:
    """Cancel the child runs the workflow is waiting for (flagged in the store first, so none is missed); returns
    those flagged, not those that finished meanwhile. Best effort per child: the workflow's own cancel of its
    children (`workflow_flag_children_cancelled`, retried) and the next poll of the cancelling workflow do a failed
    one again."""
    state = await gateway.state(run_id)
    if state is None or state.progress is None:
        return []
    cancelled = []
    for child_id in state.progress.child_runs:
        child = await services.store.get_run(child_id)
        if child is None or child.finished:
            continue
        try:
            flagged = await cancel(
                services.store, gateway, child, WORKFLOW_CANCEL_REASON, conversations=services.conversations
            ) is None
        except Exception as error:
            log.warning("could not cancel child run %s of workflow %s: %s", child_id, run_id, error)
            continue
        if flagged:
            cancelled.append(child_id)
    return cancelled


@http_endpoint
async def signal_workflow_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    services = RunServices.current()
    record = await _workflow_run_or_404(services, req.route_params["run_id"])
    name = req.route_params["name"]
    definition = _definition_or_404(services, workflow_name(record) or "")
    if name not in definition.signal_names():
        known = ", ".join(sorted(definition.signal_names())) or "none"
        raise ApiProblem(
            404,
            "signal_not_found",
            "Unknown signal",
            f"Workflow '{definition.name}' waits for no signal '{name}' (known: {known}).",
            field="path.name",
        )
    body = read_json_body(req, SignalRequest)
    key, session_id = idempotency.key_of(req), control_session_id(record.run_id)
    if record.finished:
        earlier = await accepted_before(services.store, session_id, name, body.payload, key)
        if earlier is None:
            raise _finished(record)
        return _accepted(record.run_id, name, earlier)
    # Queued in the store first (its index allocated atomically; once per Idempotency-Key), then rung: the workflow
    # consumes the signals of a name one by one in index order, each exactly once (served_workflows/README.md,
    # "Signals").
    signal = await append_once(services.store, session_id, name, body.payload, key)
    await _ring_signal(services, WorkflowGateway(client), record.run_id, name, signal.index)
    return _accepted(record.run_id, name, signal)


def _accepted(run_id: str, name: str, signal: QueuedSignal) -> func.HttpResponse:
    body = {"run_id": run_id, "signal": name, "signal_id": signal.signal_id, "index": signal.index,
            "status": "accepted"}
    return json_response(body, 202)


async def _ring_signal(services: RunServices, gateway: WorkflowGateway, run_id: str, name: str, index: int) -> None:
    """Ring a stored signal. A refused ring (the SDK raises on the host's 404/410) is the caller's 409 when the
    workflow finished meanwhile; when no orchestration is running yet (its start request has stored the record but
    not started it, or a rewind's continuation has not started) the stored signal stands: the workflow asks the
    store before it waits for a signal. A 500 there would make the caller send the signal again, and the copy would
    feed the next step of that name."""
    try:
        await gateway.send_signal(run_id, name, index)
    except Exception:
        refusal = await read_refusal(lambda: gateway.state(run_id), lambda: services.store.get_run(run_id))
        if refusal.finished is not None:  # it finished meanwhile: nobody will take the signal
            raise _finished(refusal.finished) from None
        if refusal.running:
            raise
        log.info("workflow %s is not running yet: signal %s:%d waits in the store", run_id, name, index)


async def _wait_for_view(
    services: RunServices,
    gateway: WorkflowGateway,
    record: RunRecord,
    cursor: int | None,
    wait_seconds: float,
    req: func.HttpRequest,
    *,
    return_on_updates: bool = True,
) -> WorkflowRunView:
    """Wait up to `wait_seconds` for the workflow to finish or need a person (and, for polls, for new steps)."""

    async def build(state: WorkflowState | None) -> WorkflowRunView:
        view = await build_workflow_view(services, record, state, cursor=cursor, base_url=base_url(req),
                                         viewer=current_principal())
        if view.status == "cancelling":
            await _cancel_children(services, gateway, record.run_id)  # a child started after the cancel request
        elif view.status not in FINAL_WORKFLOW_STATUSES and state is not None and state.progress is not None:
            await repair_waiting(services.store, gateway, record, state.progress,
                                 stalled_after=services.run_settings.decision_redelivery_after)
        return view

    return await wait_for_view(
        wait_seconds,
        lambda: gateway.state(record.run_id),
        build,
        final_statuses=FINAL_WORKFLOW_STATUSES,
        news=(lambda view: bool(view.steps)) if return_on_updates else None,
    )


def _response(view: WorkflowRunView) -> func.HttpResponse:
    return view_response(view, view.status, FINAL_WORKFLOW_STATUSES, view.links.self)
