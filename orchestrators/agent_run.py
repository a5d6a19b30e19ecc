"""The `agent_run` orchestrator: one agent run, step by step, as durable tasks.

It only translates the `RunDriver`'s commands into activities, timers and external events and feeds the results
back. Every wait is raced with the `cancel` event (a fresh waiter per race: see `orchestrators.external_events`, which
also says why a task is never shared by two races). Replay-safe: time comes from `context.current_utc_datetime`,
nothing else is read.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from datetime import timedelta
from functools import partial
from typing import Any, Literal, TypeVar

import azure.durable_functions as df
from azure.durable_functions.models.Task import TaskBase
from pydantic import BaseModel

from activities.approvals import apply_decisions, escalate_approvals, expire_approvals, record_approvals
from activities.finish import finish_run
from activities.mcp import DISCOVERY_FAILED, discover_tools
from activities.model import call_model
from activities.run_middleware import run_middleware_before
from activities.tools import invoke_tool
from agent_runs.budget import CUSTOM_STATUS_BUDGET_BYTES, PayloadBudgetExceeded, within_budget
from agent_runs.contracts import (
    CANCEL_EVENT,
    CancelEvent,
    ClosedModelTurn,
    DecisionsResult,
    EscalateApprovalsInput,
    FinishInput,
    RunInput,
    RunOutcome,
    StepFailure,
    approval_event_name,
)
from agent_runs.driver import RunDriver
from agent_runs.wire import ReplayedPayloads, compact_json
from agent_runtime.loop_types import AwaitApproval, CallModel, Finish, LoopCommand, RequestApproval, RunTools
from durable_steps import OUTAGE_RETRIES, Activity
from notifications.hooks import notify
from orchestrators.external_events import Doorbells, ExternalEvents
from orchestrators.failures import is_store_outage
from orchestrators.loop_replay import Carried, LoopStep, LoopSteps, take_carried
from orchestrators.queue_wait import take_turn_if_queued
from orchestrators.tasks import StepTasks, error_text, failed, failure_of
from orchestrators.workflow_ring import WorkflowRing

# Stable codes of failures the orchestrator itself decides (the detail follows after ": ").
MODEL_CALL_FAILED = "model_call_failed"
TOOL_CALL_FAILED = "tool_call_failed"
APPROVAL_STEP_FAILED = "approval_step_failed"
PAYLOAD_TOO_LARGE = "payload_too_large"
RUN_MIDDLEWARE_FAILED = "run_middleware_error"


InputT = TypeVar("InputT", bound=BaseModel)

_PROGRESS = ReplayedPayloads("custom status", CUSTOM_STATUS_BUDGET_BYTES)


def _publish(context: df.DurableOrchestrationContext, driver: RunDriver) -> dict[str, Any]:
    if context.is_replaying:  # an earlier episode published it too, most likely: looked up by the driver's key
        status = _PROGRESS.payload_for(driver.progress_key(), driver.progress)
    else:
        status = _PROGRESS.fresh(driver.progress())
    context.set_custom_status(status)
    return status


def agent_run(context: df.DurableOrchestrationContext) -> Generator[Any, Any, dict[str, Any]]:
    ring = WorkflowRing(context)
    try:
        return (yield from _run(context, ring))
    except Exception as crash:
        # The orchestration crashes (it ends `Failed` with this same error): a branch of a fail-fast step rings its
        # workflow first, so the step does not wait for its other branches. Deterministic: the crash recurs at the
        # same point on every replay, and the ring is then found in the history.
        yield from ring.crashed(crash)
        raise


def _run(context: df.DurableOrchestrationContext, ring: WorkflowRing) -> Generator[Any, Any, dict[str, Any]]:
    cancels = ExternalEvents(context, CANCEL_EVENT)
    carried = take_carried(context)  # the last episode waited on a loop step of this very replay (loop_replay)
    if carried is not None and carried.direct:
        # Nothing came before its loop, so nothing does here (the same history): go on from its step.
        driver, steps = carried.driver, LoopSteps(context, carried.start, direct=True, carried=carried)
        command = yield from _go_on(context, cancels, carried, steps)
    else:
        started = yield from _start(context, cancels)
        if started is None:
            return {}  # cancelled while queued, or continued as new to keep waiting (orchestrators.queue_wait)
        driver, command, direct = started
        steps = LoopSteps(context, command, direct=direct, carried=carried)
        if carried is not None and carried.start == command:
            driver = carried.driver
            command = yield from _go_on(context, cancels, carried, steps)
    while not isinstance(command, Finish):
        try:
            command = yield from _next(context, driver, cancels, command, steps)
        except PayloadBudgetExceeded as error:
            # Deterministic: the same oversized payload is built again on replay, so the run fails the same way.
            command = driver.on_failure(f"{PAYLOAD_TOO_LARGE}: {error}")
        if command is None:  # continued as new
            return {}

    closed = driver.closed_by_step  # the last model call's answer ended the loop and closed the run
    if closed is None:
        _publish(context, driver)
        finished = yield from _close(context, driver.finish_input(command))
        # Histories from before `finish_run` returned its verdict hold null: the loop's verdict stands.
        closed = finish_run.parse(finished) if finished else None
    outcome = driver.on_finished(command, closed)
    _publish(context, driver)
    if outcome.status == "failed":  # only runs started by a fail-fast step have a workflow to ring
        yield from ring.failed(driver.ring_workflow, driver.run.run_id)
    yield from _notify(context, driver, "finished")
    return compact_json(_with_resume_point(outcome, driver))


def _close(context: df.DurableOrchestrationContext, finish: FinishInput) -> Generator[Any, Any, Any]:
    """`finish_run`, tried again after each wait of `OUTAGE_RETRIES` while it fails for good because the store is
    down (for longer than its own retries): a run that crashed there would hold its session, its record open, until
    a poll of it closed it (a workflow's child, a run whose client left, may never be polled). Any other failure (a
    bug) fails alike every time: the orchestration fails at once, and a poll closes the run. Deterministic: the same
    failures replay, and a history from before failed here for good (its orchestration ended)."""
    for wait in OUTAGE_RETRIES:
        task = finish_run.call(context, finish)  # (a payload over the budget raises here, every time: not again)
        try:
            return (yield task)
        except Exception as error:
            if not is_store_outage(error):
                raise
            yield context.create_timer(context.current_utc_datetime + wait)
    return (yield finish_run.call(context, finish))


def _start(
    context: df.DurableOrchestrationContext, cancels: ExternalEvents
) -> Generator[Any, Any, tuple[RunDriver, LoopCommand, bool] | None]:
    """The run's driver and the loop's first command, after what comes before the loop: the session's queue, the
    run middleware's pre-processing, MCP tool discovery. The flag says that none of them did (no task before the
    loop). None when the orchestration is done for now (`orchestrators.queue_wait`)."""
    run_input = RunInput.model_validate(context.get_input())
    direct = not run_input.queued
    run_input = yield from take_turn_if_queued(context, run_input, cancels)
    if run_input is None:
        return None
    driver = RunDriver(run_input)
    if driver.needs_middleware_before():
        direct = False
        command: LoopCommand = yield from _run_middleware_before(context, driver, cancels)
    else:
        command = driver.first_command()
    if run_input.discover_tools and run_input.generation == 0 and not isinstance(command, Finish):
        # MCP tools: listed once, by the first execution (after the run middleware let the run proceed)
        direct = False
        command = (yield from _discover_tools(context, driver, cancels, run_input)) or command
    return driver, command, direct


def _go_on(
    context: df.DurableOrchestrationContext, cancels: ExternalEvents, carried: Carried, steps: LoopSteps
) -> Generator[Any, Any, LoopCommand]:
    """Replay the carried loop steps, then settle the one the last episode waited on with its driver."""
    waited_on = yield from steps.fast_forward(cancels, carried)
    return (yield from _settle_loop_step(context, carried.driver, cancels, carried.command, waited_on, steps))


def _with_resume_point(outcome: RunOutcome, driver: RunDriver) -> RunOutcome:
    """A run that failed in a repeatable step says where a rewind goes on from (when that fits the payload budget:
    the same input a continue-as-new would carry)."""
    resume = driver.resume_point()
    if resume is None:
        return outcome
    try:
        within_budget(resume.model_dump(mode="json"), "resume point")
    except PayloadBudgetExceeded:
        return outcome
    return outcome.model_copy(update={"resume": resume})


def _notify(
    context: df.DurableOrchestrationContext, driver: RunDriver, what: Literal["approvals", "finished"],
    cancels: ExternalEvents | None = None,
) -> Generator[Any, Any, LoopCommand | None]:
    """Record the transition's events and wake their deliveries (only runs started with notifications configured).
    `cancels`: while the run still runs, a failing recording's waits race cancel, as its other waits do; a cancel
    that won is taken here (the run's next command), before any further step could end the run otherwise."""
    run = driver.run
    yield from notify(context, driver.notifications, run_id=run.run_id, session_id=run.session_id, agent=run.agent,
                      what=what, seq=driver.notify_seq, cancels=cancels)
    return _cancelled_meanwhile(driver, cancels) if cancels is not None else None


def _next(
    context: df.DurableOrchestrationContext,
    driver: RunDriver,
    cancels: ExternalEvents,
    command: LoopCommand,
    steps: LoopSteps,
) -> Generator[Any, Any, LoopCommand | None]:
    """Carry out one command; returns the next one, or None once the execution continued as new."""
    received = cancels.take()  # a cancel that arrived while no step was raced with it
    if received is not None:
        return driver.on_cancel(CancelEvent.model_validate(received).reason)
    if driver.should_continue_as_new(command):
        next_input = compact_json(driver.continue_as_new_input(command))
        context.continue_as_new(within_budget(next_input, "continue-as-new input"))
        return None
    replayed = context.is_replaying  # whether an earlier episode built this step's payloads too, most likely
    if isinstance(command, CallModel):
        payload = call_model.payload(driver.model_call(command), replayed=replayed)
        step = LoopStep(call_model, (payload,))
        return (yield from _settle_loop_step(context, driver, cancels, command, step, steps))
    if isinstance(command, RunTools):
        payloads = tuple(invoke_tool.payload(call, replayed=replayed) for call in driver.tool_calls(command))
        step = LoopStep(invoke_tool, payloads)
        return (yield from _settle_loop_step(context, driver, cancels, command, step, steps))
    if isinstance(command, RequestApproval | AwaitApproval):
        steps.stop_carrying()  # its waits are not loop steps (`orchestrators.loop_replay`)
        return (yield from _wait_for_approvals(context, driver, command, cancels))
    raise TypeError(f"unexpected loop command {command!r}")  # pragma: no cover - the loop's vocabulary is closed


def _settle_loop_step(
    context: df.DurableOrchestrationContext,
    driver: RunDriver,
    cancels: ExternalEvents,
    command: CallModel | RunTools,
    step: LoopStep,
    steps: LoopSteps,
) -> Generator[Any, Any, LoopCommand]:
    """Schedule a model call or a tool batch the driver has given out, race it with cancel, feed its result back."""
    tasks = step.schedule(context)
    waiting = (steps, step, command)  # a carried step has its status (its driver published it in the last episode)
    if isinstance(command, CallModel):
        done = yield from _step(
            context, driver, cancels, tasks, MODEL_CALL_FAILED, closes=_closed_model_turn, waiting=waiting
        )
        return done if done is not None else driver.on_model_result(call_model.result(tasks.work))
    done = yield from _step(context, driver, cancels, tasks, TOOL_CALL_FAILED, waiting=waiting)
    if done is not None:
        return done
    return driver.on_tool_results([invoke_tool.result(task) for task in tasks.tasks])


def _run_middleware_before(
    context: df.DurableOrchestrationContext, driver: RunDriver, cancels: ExternalEvents
) -> Generator[Any, Any, LoopCommand]:
    """The run middleware's pre-processing (an activity, raced with cancel): the first command, or the Finish the
    middleware decided."""
    tasks = _one(context, run_middleware_before, driver.middleware_before_input())
    done = yield from _step(context, driver, cancels, tasks, RUN_MIDDLEWARE_FAILED)
    if done is not None:
        return done
    return driver.on_middleware_before(run_middleware_before.result(tasks.work))


def _one(context: df.DurableOrchestrationContext, activity: Activity[InputT, Any], step_input: InputT) -> StepTasks:
    """A step of one activity call (its input checked against the budget once, here)."""
    return StepTasks(context, [partial(activity.schedule, context, activity.payload(step_input))])


def _closed_model_turn(task: TaskBase) -> ClosedModelTurn | None:
    result = call_model.result(task)
    return result if isinstance(result, ClosedModelTurn) else None


def _step(
    context: df.DurableOrchestrationContext,
    driver: RunDriver,
    cancels: ExternalEvents,
    tasks: StepTasks,
    failure: str,
    *,
    closes: Callable[[TaskBase], ClosedModelTurn | None] | None = None,
    waiting: tuple[LoopSteps, LoopStep, LoopCommand] | None = None,
) -> Generator[Any, Any, LoopCommand | None]:
    """Publish progress, then race the step's work with cancel. Returns the next command when the step was cancelled
    or failed (after its retries: the run fails with `failure` as its code), None when it succeeded (the caller feeds
    its result to the driver). `closes`: how to tell that the work closed the run - then a cancel that won the race
    came too late (the store keeps the first finish), and the run ends as the work closed it. `waiting`: the loop
    step this is (the episode may end waiting on it: `orchestrators.loop_replay`).

    Work that failed for good because the store was down is scheduled again after each wait of `OUTAGE_RETRIES`
    (raced with cancel), about an hour in all, rather than fail the run: the store back, the run goes on as if
    nothing happened. Only runs started since (`RunInput.steps_wait_out_outages`): a history from before failed the
    run there."""
    if waiting is not None and waiting[1].status is not None:
        status = waiting[1].status
        context.set_custom_status(status)
    else:
        status = _publish(context, driver)
    outage_waits = iter(OUTAGE_RETRIES if driver.steps_wait_out_outages else ())
    while True:
        cancel = cancels.waiter()
        work = tasks.work
        if waiting is None:
            winner = yield context.task_any([work, cancel])
        else:
            steps, step, command = waiting
            steps.waiting(step, status, driver, command)
            try:
                winner = yield context.task_any([work, cancel])
            except Exception:
                steps.resumed()
                raise
            steps.resumed()  # (not when the episode ends here: the SDK closes the generator with GeneratorExit)
        if winner is cancel:
            yield from _drain_within(context, work, driver.cancel_grace_seconds)
            closed = closes(work) if closes is not None and work.is_completed and not failed(work) else None
            if closed is not None:
                return driver.on_model_result(closed)
            return driver.on_cancel(CancelEvent.model_validate(cancels.take() or {}).reason)
        if not failed(work):
            return None
        wait = next(outage_waits, None) if is_store_outage(failure_of(work)) else None
        if wait is None:
            return driver.on_failure(f"{failure}: {error_text(work)}")
        if waiting is not None:
            waiting[0].stop_carrying()  # an episode that waits on the timer leaves nothing for the next one
        cancelled = yield from _wait_out(context, cancels, wait)
        if cancelled:
            return driver.on_cancel(CancelEvent.model_validate(cancels.take() or {}).reason)
        tasks.again()


def _wait_out(
    context: df.DurableOrchestrationContext, cancels: ExternalEvents, wait: timedelta
) -> Generator[Any, Any, bool]:
    """Wait `wait` on a durable timer, raced with cancel: whether the run was cancelled meanwhile."""
    timer = context.create_timer(context.current_utc_datetime + wait)
    cancel = cancels.waiter()
    if (yield context.task_any([timer, cancel])) is timer:
        return False
    timer.cancel()
    return True


def _discover_tools(
    context: df.DurableOrchestrationContext, driver: RunDriver, cancels: ExternalEvents, run_input: RunInput
) -> Generator[Any, Any, LoopCommand | None]:
    """List and record the run's MCP tools (every later step reads the recorded list). Returns the next command
    when discovery failed or the run was cancelled meanwhile, None to go on."""
    driver.discovery_started()
    tasks = _one(context, discover_tools, run_input.run)
    done = yield from _step(context, driver, cancels, tasks, DISCOVERY_FAILED)
    if done is not None:
        return done
    discovered = discover_tools.result(tasks.work)
    if isinstance(discovered, StepFailure):
        # Any other code is the verdict of a run closed before discovery (`activities.mcp`): it ends as its record
        # says, with no resume point (a rewind of a run given up by its start would run the turn its caller retried).
        repeatable = discovered.code == DISCOVERY_FAILED
        return driver.on_failure(f"{discovered.code}: {discovered.message}", repeatable=repeatable)
    return None


def _drain_within(
    context: df.DurableOrchestrationContext, work: TaskBase, grace_seconds: float
) -> Generator[Any, Any, None]:
    """A cancelled run lets its step in flight finish (its writes land before the run closes), but waits at most
    `grace_seconds`: a hung step is abandoned and the run still ends `cancelled` (`invoke_tool` does not write a
    result for a run that has closed)."""
    if work.is_completed:
        return
    timer = context.create_timer(context.current_utc_datetime + timedelta(seconds=grace_seconds))
    try:
        winner = yield context.task_any([work, timer])
    except Exception:
        return
    if winner is not timer:
        timer.cancel()


def _wait_for_approvals(
    context: df.DurableOrchestrationContext,
    driver: RunDriver,
    command: RequestApproval | AwaitApproval,
    cancels: ExternalEvents,
) -> Generator[Any, Any, LoopCommand]:
    """Record the requests, then apply decisions until none is pending, the deadline passes or the run is cancelled.

    Each approval has its own event name (a doorbell: the decision is in the store, written before the event was
    raised), so no decision can overwrite or replay another (see `orchestrators.external_events`). Whenever a bell
    rings, one activity applies every decision the store holds for the pending approvals: a burst of decisions is
    applied in one step, and a decision whose event was lost is applied with the next one that arrives. Each wait
    races fresh waiters, a fresh deadline timer and cancel."""
    if isinstance(command, RequestApproval):
        requests = driver.approval_requests(command, context.current_utc_datetime)
        tasks = _one(context, record_approvals, requests)
        done = yield from _step(context, driver, cancels, tasks, APPROVAL_STEP_FAILED)
        if done is not None:
            return done
        driver.on_approvals_recorded()
        cancelled = yield from _notify(context, driver, "approvals", cancels)
        if cancelled is not None:
            return cancelled
    expires_at = driver.approvals_expire_at
    if expires_at is None:  # pragma: no cover - approval_requests sets it before any wait, also across replays
        return driver.on_failure(f"{APPROVAL_STEP_FAILED}: no approval deadline")
    doorbells = Doorbells(context, approval_event_name)
    next_command: LoopCommand = command
    while driver.pending_approvals:
        _publish(context, driver)
        received_cancel = cancels.take()
        if received_cancel is not None:
            return driver.on_cancel(CancelEvent.model_validate(received_cancel).reason)
        rung = doorbells.rung(driver.pending_approvals)
        if not rung:
            timer = context.create_timer(expires_at)
            yield context.task_any([*doorbells.waiters(driver.pending_approvals), timer, cancels.waiter()])
            if timer.is_completed:
                escalation = driver.escalation_input(context.current_utc_datetime)
                applied = yield from _deadline_step(context, driver, cancels, escalation)
                if isinstance(applied, Finish):
                    return applied
                if escalation is None:
                    return driver.on_timeout() or applied or next_command
                next_command = applied or next_command
                expires_at = driver.approvals_expire_at or expires_at
                continue  # the same approvals, now waiting for whom they were escalated to, until the new deadline
            timer.cancel()
            continue  # take what arrived: cancel first, else the decisions
        applied = yield from _apply_decisions(context, driver, cancels, rung)
        if isinstance(applied, DecisionsResult):
            doorbells.silence(applied.unconfirmed)
            continue
        if applied is not None:
            next_command = applied
            if isinstance(applied, Finish):
                return applied
    return next_command


def _cancelled_meanwhile(driver: RunDriver, cancels: ExternalEvents) -> LoopCommand | None:
    """A cancel that won the wait of a recording (`notifications.hooks`: it gave the events up for it) is taken
    before the run goes on (a deadline, more decisions to apply, whatever ends the run otherwise). Only runs whose
    recordings race cancel: histories from before took the run's course (their cancel, if any, came on an older
    waiter that nothing took)."""
    received = cancels.take() if driver.notify_gives_up else None
    return driver.on_cancel(CancelEvent.model_validate(received).reason) if received is not None else None


def _apply_decisions(
    context: df.DurableOrchestrationContext, driver: RunDriver, cancels: ExternalEvents, rung: list[str]
) -> Generator[Any, Any, LoopCommand | DecisionsResult | None]:
    """Apply what the store holds for the pending approvals, as many calls as the payload budget needs. Returns the
    loop's next command if a decision changed it, a `Finish` if the step failed or was cancelled, or the result when
    nothing was applied."""
    command: LoopCommand | None = None
    while True:
        tasks = _one(context, apply_decisions, driver.decisions_input(rung))
        done = yield from _step(context, driver, cancels, tasks, APPROVAL_STEP_FAILED)
        if done is not None:
            return done
        result = apply_decisions.result(tasks.work)
        if result.cancelled is not None:  # the store's flag: its cancel event has not reached this run yet
            return driver.on_cancel(result.cancelled)
        command = driver.on_decisions(result) or command
        cancelled = (yield from _notify(context, driver, "approvals", cancels)) if result.decided else None
        if cancelled is not None:
            return cancelled
        if not result.more or not driver.pending_approvals:
            return command if command is not None or result.decided else result


def _deadline_step(
    context: df.DurableOrchestrationContext,
    driver: RunDriver,
    cancels: ExternalEvents,
    escalation: EscalateApprovalsInput | None,
) -> Generator[Any, Any, LoopCommand | None]:
    """A deadline passed: expire what is still pending in the store (or hand it on, given an `escalation`), then apply
    the decisions that won the race there. Returns a `Finish` if the run ended, else the loop's command if a decision
    changed it."""
    if escalation is not None:
        tasks = _one(context, escalate_approvals, escalation)
    else:
        tasks = _one(context, expire_approvals, driver.expire_input())
    done = yield from _step(context, driver, cancels, tasks, APPROVAL_STEP_FAILED)
    if done is not None:
        return done
    driver.on_deadline_step(
        escalate_approvals.result(tasks.work).escalated if escalation is not None
        else expire_approvals.result(tasks.work).expired
    )
    cancelled = yield from _notify(context, driver, "approvals", cancels)
    if cancelled is not None:
        return cancelled
    command: LoopCommand | None = None
    while decided := driver.decided_during_deadline:
        applied = yield from _apply_decisions(context, driver, cancels, decided)
        if isinstance(applied, DecisionsResult):
            # The deadline step saw these decided; a store that says otherwise now is broken: fail rather than loop.
            return driver.on_failure(f"{APPROVAL_STEP_FAILED}: decisions of {applied.unconfirmed} vanished")
        if isinstance(applied, Finish):
            return applied
        command = applied or command
    return command
