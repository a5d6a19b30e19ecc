"""Agent runs over HTTP: start, poll (continuation tokens, long-poll), cancel."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import azure.durable_functions as df
import azure.functions as func

from agent_runs.contracts import RunProgress
from agent_runs.queued_input import keep_queued_input
from agent_runs.services import RunServices
from agent_runs.starting import (
    new_run_record,
    run_input_for,
    write_input,
)
from agent_runtime.agents import AgentDefinition, UnknownAgentError
from agent_runtime.messages import Message
from agent_runtime.overrides import RunOverrides
from agent_runtime.spend import BudgetAboveAgentLimitError, RunBudget
from http_api.access import owns, stored_run
from http_api.adapter import http_endpoint, json_response, query_model, read_json_body
from http_api.caller import current_principal
from http_api.decision_delivery import ring_stalled
from http_api.durable_gateway import JUST_CREATED, DurableGateway, OrchestrationState
from http_api.models import FINAL_STATUSES, RunView, StartRunRequest
from http_api.polling import PollQuery, view_response
from http_api.problems import ApiProblem, not_found
from http_api.request_context import base_url
from http_api.run_lifecycle import cancel, claim_start, create_and_start, open_run_session, poll_cursor, wait_for_view
from http_api.run_views import TOKEN_SCOPE, build_run_view, partial_output, reconcile, waiting_approvals
from http_api.start_webhook import start_webhook
from http_api.workflow_gateway import WorkflowGateway
from http_api.workflows import cancel_workflow
from notifications.http.webhook_field import checked_webhook
from notifications.starting import prepare_notifications
from session_store import CLIENT_CANCEL_REASON, MessageRecord, RunRecord, SessionBusyError, SessionRecord, SessionStore
from session_store.records import QueuePosition
from telemetry.trace_context import RunTrace


def agent_or_404(services: RunServices, name: str) -> AgentDefinition:
    try:
        return services.agents.get(name)
    except UnknownAgentError as error:
        raise ApiProblem(404, "agent_not_found", "Agent not found", str(error), field="path.agent") from error


def is_workflow_run(run: RunRecord) -> bool:
    return run.kind == "workflow"


async def run_or_404(store: SessionStore, run_id: str) -> RunRecord:
    """The run, if the caller owns it; 404 otherwise (another principal's run is not revealed)."""
    run = await stored_run(store, run_id)
    if run is None or not owns(current_principal(), run.owner_id):
        raise not_found("run_not_found", "Run", run_id, field="path.run_id")
    return run


@http_endpoint
async def start_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    services = RunServices.current()
    agent = agent_or_404(services, req.route_params["agent"])
    body = read_json_body(req, StartRunRequest)
    budget = request_budget(agent, body.budget)
    trace = RunTrace.start(req.headers)  # the caller's W3C trace context, or a new trace rooted at the run
    gateway = DurableGateway(client)
    start = await claim_start(req, services.store, f"agents/{agent.name}", body, gateway)
    # After the key: a replay starts nothing (its webhook is not checked again), a take-over does not resolve it.
    webhook = await start_webhook(start, partial(checked_webhook, body.webhook))
    stored_input: list[MessageRecord] = []
    replay = start.replay
    if replay is not None and body.if_busy == "interrupt":
        await _interrupt_again(services.store, gateway, replay)
    run = replay or await start_agent_run(
        services,
        gateway,
        agent,
        run_id=start.run_id,
        written=start.written,
        session_id=body.session_id,
        inputs=[Message(role=m.role, contents=m.content) for m in body.input_messages()],
        metadata=body.metadata,
        approval_timeout_seconds=body.approval_timeout_seconds,
        budget=budget,
        trace=trace,
        if_busy=body.if_busy,
        on_unclaimed=start.release,
        webhook=webhook,
        stored_input=stored_input,
    )
    return await answer_started_run(
        services, gateway, run, req, body.wait_seconds, stored_input=None if replay else stored_input
    )


async def answer_started_run(
    services: RunServices, gateway: DurableGateway, run: RunRecord, req: func.HttpRequest, wait_seconds: float,
    *, stored_input: Sequence[MessageRecord] | None = None,
) -> func.HttpResponse:
    """The answer to a request that started `run` (or, with an `Idempotency-Key`, repeats the request that did): its
    view once it finished or needs a person, or after `wait_seconds` (202 while it runs). `stored_input`: the run's
    input as this request stored it; None when this request did not start the run."""
    if wait_seconds <= 0 and stored_input is not None and run.ordinal != 0:
        # No wait: the view a state read made at once would show when it beats the first episode (runs race their
        # start's answer), built without that read. A queued run (ordinal 0) is read back: its record may change.
        view = await build_run_view(
            services.store, services.tokens, run, JUST_CREATED, cursor=None, base_url=base_url(req),
            viewer=current_principal(), known=stored_input,
        )
    else:
        view = await _wait_for_view(
            services, gateway, run, cursor=None, wait_seconds=wait_seconds, req=req, return_on_updates=False,
            known=stored_input or (),
        )
    return _run_response(view)


async def start_agent_run(
    services: RunServices,
    gateway: DurableGateway,
    agent: AgentDefinition,
    *,
    session_id: str | None,
    inputs: list[Message],
    metadata: dict[str, Any],
    run_id: str | None = None,
    approval_timeout_seconds: int | None = None,
    budget: RunBudget | None = None,
    trace: RunTrace | None = None,
    overrides: RunOverrides | None = None,
    if_busy: str = "reject",
    on_unclaimed: Callable[[], Awaitable[None]] | None = None,
    webhook: str | None = None,
    stored_input: list[MessageRecord] | None = None,
    after_run_count: int | None = None,
    written: RunRecord | None = None,
    branched_from: str | None = None,
) -> RunRecord:
    """Start a run of the caller's: claim (or queue in) the session - a new one without `session_id` - store the
    input, start the orchestration. Every HTTP surface that starts agent runs goes through here, so they follow the
    same rules. `on_unclaimed` runs when the session could not be claimed (nothing was started). `stored_input`
    receives the input messages as stored (the start's answer shows them without reading them back).
    `after_run_count`: the run must follow the session's run of that ordinal (`SessionMovedOnError` otherwise).
    `written`: the run's record, written by an earlier request that never started it (`RunStart.unstarted`).
    `branched_from`: the response a Responses branch continues (`RunRecord.branched_from`)."""
    store = services.store
    caller = current_principal()

    new_run_id = written.run_id if written is not None else run_id or uuid.uuid4().hex
    # A new session is named after the run that creates it (both ids are fresh): a store finds such a run without an
    # index item (`begin_run(new_session=...)`).
    session = session_id or new_run_id
    record = written or new_run_record(
        new_run_id, session, agent, metadata, overrides=overrides, owner_id=caller.id, owner_name=caller.name,
        branched_from=branched_from,
    )

    async def create() -> RunRecord:
        if written is not None:
            return written
        if session_id is None:  # a new session (an id made up here): created already held by the run, one write
            fresh = SessionRecord(session_id=session, agent=agent.name, owner_id=caller.id, owner_name=caller.name)
            return await store.begin_run(record, new_session=fresh)
        await open_run_session(store, session_id, agent)
        return await _begin_run(store, gateway, record, QUEUE_POSITIONS[if_busy], after_run_count)

    async def launch(run: RunRecord, submitting: Callable[[], None]) -> None:
        queued = run.ordinal == 0  # waiting for the session: its input waits aside (agent_runs.queued_input)
        if queued:
            await keep_queued_input(store, run.session_id, run.run_id, inputs)
            input_count = 0
        else:
            stored = await write_input(
                store, run, inputs, new_session=services.conversations if session_id is None else None
            )
            input_count = len(stored)
            if stored_input is not None:
                stored_input.extend(stored)
        run_input = run_input_for(
            run,
            agent,
            services.run_settings,
            input_count=input_count,
            approval_timeout_seconds=approval_timeout_seconds,
            budget=budget,
            trace=trace,
        )
        notify = await prepare_notifications(store, run, webhook)
        submitting()
        await gateway.start_run(run_input.model_copy(update={"queued": queued}).notifying(notify))

    run = await create_and_start(store, record, create, launch, on_unclaimed=on_unclaimed, orchestrations=gateway)
    if run.ordinal == 0 and if_busy == "interrupt":
        await _interrupt_active(store, gateway, run.session_id)
    return run


def request_budget(agent: AgentDefinition, requested: RunBudget | None) -> RunBudget | None:
    """The agent's budget tightened by the request's: a request may lower a limit, never raise it."""
    try:
        return agent.run_budget(requested)
    except BudgetAboveAgentLimitError as error:
        raise ApiProblem(
            422, "budget_above_agent_limit", "The budget exceeds the agent's", str(error),
            field=f"body.budget.{error.limit}",
        ) from error


QUEUE_POSITIONS: dict[str, QueuePosition | None] = {"reject": None, "enqueue": "back", "interrupt": "front"}


async def _interrupt_active(store: SessionStore, gateway: DurableGateway, session_id: str) -> None:
    """`if_busy=interrupt`: cancel the session's active run (the same graceful cancel as the cancel route); the new
    run, first in the queue, gets the session when the cancelled one has released it."""
    session = await store.get_session(session_id)
    active = await store.get_run(session.active_run_id) if session and session.active_run_id else None
    if active is None or active.finished or active.kind != "agent":
        return
    await cancel(store, gateway, active, "interrupted by a new run")


async def _interrupt_again(store: SessionStore, gateway: DurableGateway, run: RunRecord) -> None:
    """A repeated `interrupt` start (same `Idempotency-Key`) whose run still waits in the queue: its first request may
    have failed after queueing the run and before the cancel reached the active run, which would then hold the
    session (and this run) until it ended by itself. Cancelling again is harmless: the flag keeps its first time."""
    if run.ordinal == 0 and not run.finished:
        await _interrupt_active(store, gateway, run.session_id)


async def _begin_run(
    store: SessionStore,
    gateway: DurableGateway,
    record: RunRecord,
    queue: QueuePosition | None = None,
    after_run_count: int | None = None,
) -> RunRecord:
    """Claim the session (or queue the run in it); a session held by a run whose orchestration already died is
    released first, so neither a start nor a queue waits on a run that will never end."""
    if queue is not None:
        session = await store.get_session(record.session_id)
        active = await store.get_run(session.active_run_id) if session and session.active_run_id else None
        if active is not None and active.run_id != record.run_id:
            await reconcile(store, active, await gateway.state(active.run_id))
        return await store.begin_run(record, queue=queue, after_run_count=after_run_count)
    for _ in range(2):
        try:
            return await store.begin_run(record, after_run_count=after_run_count)
        except SessionBusyError as busy:
            active = await store.get_run(busy.active_run_id) if busy.active_run_id else None
            # No record: a start whose run is still being written (or never was, until the store closes it for that).
            if active is None or not (await reconcile(store, active, await gateway.state(active.run_id))).finished:
                raise _session_busy(busy) from busy
    try:
        return await store.begin_run(record, after_run_count=after_run_count)
    except SessionBusyError as busy:  # held by a run that has finished but not released it yet (the store will)
        raise _session_busy(busy) from busy


def _session_busy(busy: SessionBusyError) -> ApiProblem:
    return ApiProblem(
        409,
        "session_busy",
        "The session has an active run",
        f"Run '{busy.active_run_id}' is still active in this session; wait for it or cancel it.",
        field="body.session_id",
        active_run_id=busy.active_run_id,
    )


@http_endpoint
async def get_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    services = RunServices.current()
    run = await run_or_404(services.store, req.route_params["run_id"])
    if is_workflow_run(run):
        raise ApiProblem(
            404,
            "run_is_a_workflow",
            "This run is a workflow run",
            f"Poll it at /api/workflows/runs/{run.run_id} (its gates' approvals use the /api/runs routes).",
            field="path.run_id",
            workflow_run=f"{base_url(req)}/api/workflows/runs/{run.run_id}",
        )
    query = query_model(req, PollQuery)
    view = await _wait_for_view(
        services,
        DurableGateway(client),
        run,
        cursor=poll_cursor(services, query.continuation_token, TOKEN_SCOPE, run.run_id),
        wait_seconds=query.wait_seconds,
        req=req,
        return_on_updates=True,
    )
    return _run_response(view)


@http_endpoint
async def cancel_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    services = RunServices.current()
    run = await run_or_404(services.store, req.route_params["run_id"])
    await request_cancel(services, client, run)
    return json_response({"run_id": run.run_id, "status": "cancelling"}, status=202)


async def request_cancel(services: RunServices, client: df.DurableOrchestrationClient, run: RunRecord) -> None:
    """Ask a running run to stop (409 once it has finished); the run ends `cancelled` at its next step."""
    if run.finished:
        raise _run_finished(run)
    if is_workflow_run(run):  # the same cancel as the workflow route: the workflow and its running child runs
        finished, _ = await cancel_workflow(services, WorkflowGateway(client), run)
    else:
        finished = await cancel(
            services.store, DurableGateway(client), run, CLIENT_CANCEL_REASON, conversations=services.conversations
        )
    if finished is not None:  # it finished while the cancel was being sent
        raise _run_finished(finished)


def _run_finished(run: RunRecord) -> ApiProblem:
    return ApiProblem(409, "run_finished", "The run has already finished", f"The run is {run.status}.")


async def _wait_for_view(
    services: RunServices,
    gateway: DurableGateway,
    run: RunRecord,
    *,
    cursor: int | None,
    wait_seconds: float,
    req: func.HttpRequest,
    return_on_updates: bool,
    known: Sequence[MessageRecord] = (),
) -> RunView:
    """Wait up to `wait_seconds` for the run to finish or need action (and, for polls, for any new update)."""

    async def build(state: OrchestrationState[RunProgress] | None) -> RunView:
        waiting = await waiting_approvals(services.store, run, state)  # one read serves the redelivery and the view
        if state is not None and state.progress is not None:
            await ring_stalled(
                services.store, gateway, run, state.progress.pending_approvals, records=waiting,
                stalled_after=services.run_settings.decision_redelivery_after,
            )
        return await build_run_view(
            services.store, services.tokens, run, state, cursor=cursor, base_url=base_url(req),
            viewer=current_principal(), waiting=waiting, known=known,
        )

    async def latest_draft(view: RunView, state: OrchestrationState[RunProgress] | None) -> RunView:
        # Nothing changed but the streamed draft, which the orchestration state does not track.
        return view.model_copy(update={"partial_output": await partial_output(services.store, run, state)})

    return await wait_for_view(
        wait_seconds,
        lambda: gateway.state(run.run_id),
        build,
        final_statuses=FINAL_STATUSES,
        news=(lambda view: bool(view.updates)) if return_on_updates else None,
        on_timeout=latest_draft if wait_seconds > 0 else None,  # no wait: the view just built has the latest draft
    )


def _run_response(view: RunView) -> func.HttpResponse:
    return view_response(view, view.status, FINAL_STATUSES, view.links.self)
