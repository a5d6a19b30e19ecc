"""Workflow activities around child agent runs: create them (prompts rendered from the store), then record
their outputs as the step's journal entry (closing a child whose orchestration crashed, which nothing else
closes until someone reads its view)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import azure.durable_functions as df

from agent_runs import run_status
from agent_runs.child_runs import prepare_child_run
from agent_runs.client_errors import client_message
from agent_runs.closing import close_if_crashed
from agent_runs.contracts import CANCEL_EVENT, CancelEvent
from agent_runs.finishing import closed_as
from agent_runs.services import RunServices
from durable_steps import activity
from notifications.client_activity import client_activity
from session_store import WORKFLOW_CANCEL_REASON, RunRecord
from telemetry.workflow_spans import child_run_trace
from workflow_runtime.conditions import monitor_facts
from workflow_runtime.contracts import (
    AgentRunsRecord,
    ChildRunIds,
    NoResult,
    StartedRuns,
    StepRequest,
    StepResult,
    WorkflowRef,
)
from workflow_runtime.definition import AgentStep, MonitorStep, ParallelStep
from workflow_runtime.journal import WorkflowContext
from workflow_runtime.references import UnresolvedReference, render

log = logging.getLogger(__name__)
SIBLING_FAILED = "another branch of its workflow step failed"


def child_steps(step: Any) -> list[AgentStep]:
    """The agent runs a step starts: one, the parallel branches, or a monitor's check."""
    if isinstance(step, ParallelStep):
        return list(step.branches)
    if isinstance(step, MonitorStep):
        check = step.check_step()
        return [check] if isinstance(check, AgentStep) else []
    return [step] if isinstance(step, AgentStep) else []


def child_run_id(workflow_run_id: str, key: str, branch: str | None) -> str:
    return f"{workflow_run_id}.{key}" + (f".{branch}" if branch else "")


def child_session_id(ref: WorkflowRef, child: AgentStep, run_id: str) -> str:
    """The session child run `run_id` of step `child` runs in: the workflow's conversation, or its own."""
    return ref.session_id if child.session == "workflow" and ref.session_id else run_id


def child_sessions(ref: WorkflowRef, key: str, step: Any) -> dict[str, str]:
    """Each child run of the step (by run id) with its session, as `workflow_start_agents` created them."""
    children = child_steps(step)
    parallel = isinstance(step, ParallelStep)
    return {
        (run_id := child_run_id(ref.run_id, key, child.id if parallel else None)): child_session_id(ref, child, run_id)
        for child in children
    }


@activity()
async def workflow_start_agents(request: StepRequest) -> StartedRuns:
    ctx = WorkflowContext.for_ref(request.ref)
    # One read serves the cancel check, the input the prompts render from and the owner (input and owner never
    # change; the flag is checked here, before any child is created, as it always was).
    workflow_run = await ctx.record()
    ended = closed_as(workflow_run)  # given up by its start after the orchestration's first read: no child run
    if ended is not None:
        return StartedRuns(ended=ended)
    if workflow_run.cancel_requested_at is not None:
        return StartedRuns(cancelled=True)
    step = ctx.definition.step(request.step_id)
    data = await ctx.data(request.refs, workflow_run)
    parallel = isinstance(step, ParallelStep)
    started = StartedRuns()
    owner_id, owner_name = workflow_run.owner_id, workflow_run.owner_name
    for child in child_steps(step):
        try:
            prompt = render(child.prompt, data)
        except UnresolvedReference as error:
            return StartedRuns(error=f"prompt of '{child.id}': {error}")
        run_id = child_run_id(request.ref.run_id, request.key, child.id if parallel else None)
        session_id = child_session_id(request.ref, child, run_id)
        run_input = await prepare_child_run(
            ctx.services,
            run_id=run_id,
            session_id=session_id,
            agent_name=child.agent,
            prompt=prompt,
            metadata={"workflow_run_id": request.ref.run_id, "workflow_step": child.id},
            trace=child_run_trace(request.ref.trace, request.ref.run_id, request.key),
            owner_id=owner_id,
            owner_name=owner_name,
        )
        if run_input is not None and parallel and request.ref.fails_fast and step.on_branch_failure == "cancel_others":
            run_input = run_input.model_copy(update={"ring_workflow": request.ref.run_id})  # its failure rings
        if run_input is None:
            started.closed.append(run_id)  # the siblings created still run: each holds its session until it ends
        else:
            started.runs.append(run_input)
    return started


def agent_output(run: RunRecord) -> dict[str, Any]:
    output = dict(run.output or {})
    return {**output, "run_id": run.run_id, "session_id": run.session_id}


def _run_failure(run: RunRecord | None, run_id: str) -> str | None:
    if run is None:
        return f"agent run '{run_id}' is missing"
    if run.status == "completed":
        return None
    error = run.error or {}
    code = str(error.get("code", run.status))
    detail = f"{code}: {client_message(code, str(error.get('message', '')))}".rstrip(": ")  # as its view says
    return f"agent run '{run_id}' ({run.agent}) ended {run.status}: {detail}"


async def _child_run(ctx: WorkflowContext, run_id: str, session_id: str | None) -> RunRecord | None:
    """A child run, read in the session it was created in (a run never leaves it) without the lookup read; one not
    found there (a run id the step does not name: none expected) is looked up, so it is never missed."""
    found = await ctx.store.get_run(run_id, session_id=session_id) if session_id else None
    return found or await ctx.store.get_run(run_id)


@client_activity()
async def workflow_record_agents(request: AgentRunsRecord, client: df.DurableOrchestrationClient) -> StepResult:
    ctx = WorkflowContext.for_ref(request.ref)
    step = ctx.definition.step(request.step_id)
    sessions = child_sessions(request.ref, request.key, step)
    runs = {run_id: await _child_run(ctx, run_id, sessions.get(run_id)) for run_id in request.run_ids}
    # A child whose orchestration crashed is closed first (a failed child, however it ended): a rewound one on every
    # look, any one once the step's wait for its children ended with a crash.
    runs = {
        run_id: await _closed_if_crashed(ctx, client, run) if run and (run.rewinds or request.failure) else run
        for run_id, run in runs.items()
    }
    if any(run is not None and not run.finished and run.rewinds for run in runs.values()):
        # A child that failed and was rewound on its own runs again (the workflow's children are never rewound by
        # the workflow, whose rewind makes new ones): the step waits for it, as for any of its children, rather
        # than fail it as unfinished and leave it running unattended - also when a sibling crashed (`failure`),
        # which fails the step once it has ended. Nothing is journaled yet. The workflow's cancel flag goes with it
        # (a step that continued as new meanwhile may have missed the cancel's event).
        cancel_requested = await ctx.cancel_requested()
        return StepResult(step_id=request.step_id, status="running", journaled=False, cancel_requested=cancel_requested)
    # The branches a failed branch had cancelled (fail-fast) are not the step's failure - while another failure is
    # (the failed branch may have been rewound on its own and completed since: the step still failed then).
    cancelled = {run_id for run_id in request.cancelled if (run := runs.get(run_id)) and run.status == "cancelled"}
    failures = [f for f in (_run_failure(run, run_id) for run_id, run in runs.items() if run_id not in cancelled) if f]
    created = [run.created_at for run in runs.values() if run is not None and run.created_at is not None]
    started_at = min(created) if created else None  # the step's span covers its agent runs
    if request.failure and not failures:
        failures.append(request.failure)
    if cancelled and not failures:  # the branch that failed first ended otherwise since: the others were cancelled
        ids = [branch.id for branch in step.branches] if isinstance(step, ParallelStep) else []
        branches = dict(zip(request.run_ids, ids, strict=False))
        failures = [
            f"branch '{branches.get(run_id, run_id)}' (agent run '{run_id}') was cancelled after a sibling failed"
            for run_id in request.run_ids
            if run_id in cancelled
        ]
    if failures:
        # The cancel route flags the workflow, then cancels its children: their ends can reach the workflow before
        # its own cancel event does. Children cancelled with the workflow end it cancelled, not failed (and, as
        # when the cancel event comes first, the unfinished step is not journaled).
        if await ctx.cancel_requested():
            return StepResult(step_id=request.step_id, status="cancelled", journaled=False)
        error = "; ".join(failures)
        await ctx.journal(
            request, step.kind, status="failed", error=error, run_ids=request.run_ids, started_at=started_at
        )
        return StepResult(step_id=request.step_id, status="failed", error=error)
    finished = [run for run in runs.values() if run is not None]
    if isinstance(step, ParallelStep):
        output: dict[str, Any] = {
            branch.id: agent_output(run) for branch, run in zip(step.branches, finished, strict=True)
        }
    else:
        output = agent_output(finished[0])
    result = StepResult(step_id=request.step_id, status="ok")
    if isinstance(step, MonitorStep):
        output, result = await monitor_facts(ctx, request, step, output)
    await ctx.journal(request, step.kind, output=output, run_ids=request.run_ids, started_at=started_at)
    result.cancel_requested = await ctx.cancel_requested()
    return result


async def _closed_if_crashed(
    ctx: WorkflowContext, client: df.DurableOrchestrationClient, run: RunRecord | None
) -> RunRecord | None:
    """A child rewound on its own runs in an orchestration the step did not start, whose crash nothing reports to
    the step: its orchestration's status says so, and the child is closed (`failed`) as its view would close it."""
    if run is None or run.finished:
        return run
    status = await client.get_status(run.run_id)
    runtime = status.runtime_status.value if status and status.runtime_status else None
    return await close_if_crashed(ctx.store, run, runtime, status.output if status else None)


@client_activity()
async def workflow_cancel_children(children: ChildRunIds, client: df.DurableOrchestrationClient) -> NoResult:
    """A branch of a fail-fast parallel step failed: cancel the others still running, as the cancel route would
    (flagged in the store, then their cancel event), so none is left running unattended."""
    await _cancel_each(children, client, SIBLING_FAILED)
    return NoResult()


@client_activity()
async def workflow_flag_children_cancelled(children: ChildRunIds, client: df.DurableOrchestrationClient) -> NoResult:
    """The workflow is cancelled while child runs work: cancel them as the cancel route does. The route's cancel of
    each child is best effort (a store write it could not make leaves a child without its flag and its event: one
    waiting for a person would wait on, for as long as its approval may take); this one is retried until it is
    done, and also reaches a child that started after the route looked."""
    await _cancel_each(children, client, WORKFLOW_CANCEL_REASON)
    return NoResult()


async def _cancel_each(children: ChildRunIds, client: df.DurableOrchestrationClient, reason: str) -> None:
    """Flag each child still open in the store (what its steps check; a flag already there stays), then raise its
    cancel event (what wakes one waiting for a decision or a timer). A child told twice ends once: its orchestrator
    takes the first cancel event, and a flagged run closes `cancelled` whatever reaches it first."""
    store, now = RunServices.current().store, datetime.now(UTC)
    for run_id in children.run_ids:
        run = await store.get_run(run_id)
        if run is None or run.finished:
            continue
        if await run_status.flag_cancel(store, run, now, reason=reason) is not None:
            continue  # it finished before the flag: nothing left to cancel
        try:
            await client.raise_event(run_id, CANCEL_EVENT, CancelEvent(reason=reason).model_dump())
        except Exception as error:  # ended meanwhile, or not started yet: the flag stops it at its next step
            log.info("cancel event for child run %s not delivered: %s", run_id, error)
