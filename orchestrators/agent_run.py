"""The `agent_run` orchestrator: one agent run, step by step, as durable tasks.

It only translates the `RunDriver`'s commands into activities, timers and external events and feeds the results
back. Every wait is raced with the `cancel` event (a fresh waiter per race: see `orchestrators.external_events`, which
also says why a task is never shared by two races). Replay-safe: time comes from `context.current_utc_datetime`,
nothing else is read.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import azure.durable_functions as df
from azure.durable_functions.models.Task import TaskBase
from pydantic import TypeAdapter

from agent_runs.budget import within_budget
from agent_runs.contracts import (
    APPROVAL_EVENT,
    CANCEL_EVENT,
    ApprovalEvent,
    CancelEvent,
    ExpireApprovalsResult,
    RunInput,
    StepFailure,
)
from agent_runs.driver import RunDriver
from agent_runtime.loop_types import (
    ApprovalDecision,
    AwaitApproval,
    CallModel,
    Finish,
    LoopCommand,
    ModelTurn,
    RequestApproval,
    RunTools,
    ToolOutcome,
)
from orchestrators.external_events import ExternalEvents
from orchestrators.queue_wait import take_turn_if_queued
from orchestrators.tasks import drain, error_text, failed

# Activity-level retries cover a crashed worker or a transient error that outlived the in-activity retry policy.
ACTIVITY_RETRY = df.RetryOptions(first_retry_interval_in_milliseconds=2000, max_number_of_attempts=3)
_model_result = TypeAdapter(ModelTurn | StepFailure)


class _Activities:
    """Names of the activities this orchestrator schedules (the function names registered in function_app)."""

    call_model = "call_model"
    invoke_tool = "invoke_tool"
    record_approvals = "record_approvals"
    apply_decision = "apply_decision"
    expire_approvals = "expire_approvals"
    finish_run = "finish_run"


def _payload(model: Any, what: str) -> dict[str, Any]:
    return within_budget(model.model_dump(mode="json"), what)




def agent_run(context: df.DurableOrchestrationContext) -> Generator[Any, Any, dict[str, Any]]:
    cancels = ExternalEvents(context, CANCEL_EVENT)
    run_input = yield from take_turn_if_queued(context, RunInput.model_validate(context.get_input()), cancels)
    if run_input is None:
        return {}  # cancelled while queued, or continued as new to keep waiting (orchestrators.queue_wait)
    driver = RunDriver(run_input)
    approvals = ExternalEvents(context, APPROVAL_EVENT)
    command: LoopCommand = driver.first_command()

    while not isinstance(command, Finish):
        received = cancels.take()  # a cancel that arrived while a step was not raced (recording approvals...)
        if received is not None:
            command = driver.on_cancel(CancelEvent.model_validate(received).reason)
            continue
        if driver.should_continue_as_new(command):
            context.continue_as_new(_payload(driver.continue_as_new_input(command), "continue-as-new input"))
            return {}
        if isinstance(command, CallModel):
            task = context.call_activity_with_retry(
                _Activities.call_model, ACTIVITY_RETRY, _payload(driver.model_call(command), "call_model input")
            )
            done = yield from _step(context, driver, cancels, task, "model_call_failed")
            command = done if done is not None else driver.on_model_result(_model_result.validate_python(task.result))

        elif isinstance(command, RunTools):
            tasks = [
                context.call_activity_with_retry(_Activities.invoke_tool, ACTIVITY_RETRY, _payload(call, "tool input"))
                for call in driver.tool_calls(command)
            ]
            done = yield from _step(context, driver, cancels, context.task_all(tasks), "tool_call_failed")
            if done is None:
                done = driver.on_tool_results([ToolOutcome.model_validate(t.result) for t in tasks])
            command = done

        elif isinstance(command, RequestApproval | AwaitApproval):
            command = yield from _wait_for_approvals(context, driver, command, approvals, cancels)

    context.set_custom_status(_payload(driver.progress(), "custom status"))
    yield context.call_activity_with_retry(
        _Activities.finish_run, ACTIVITY_RETRY, _payload(driver.finish_input(command), "finish input")
    )
    outcome = driver.on_finished(command)
    context.set_custom_status(_payload(driver.progress(), "custom status"))
    return outcome.model_dump(mode="json")


def _step(
    context: df.DurableOrchestrationContext, driver: RunDriver, cancels: ExternalEvents, work: TaskBase, failure: str
) -> Generator[Any, Any, LoopCommand | None]:
    """Publish progress, then race the step's work with cancel. Returns the next command when the step was cancelled
    or failed, None when it succeeded (the caller feeds its result to the driver)."""
    context.set_custom_status(_payload(driver.progress(), "custom status"))
    cancel = cancels.waiter()
    winner = yield context.task_any([work, cancel])
    if winner is cancel:
        yield from drain(work)
        return driver.on_cancel(CancelEvent.model_validate(cancels.take() or {}).reason)
    if failed(work):
        return driver.on_failure(f"{failure}: {error_text(work)}")
    return None


def _wait_for_approvals(
    context: df.DurableOrchestrationContext,
    driver: RunDriver,
    command: RequestApproval | AwaitApproval,
    approvals: ExternalEvents,
    cancels: ExternalEvents,
) -> Generator[Any, Any, LoopCommand]:
    """Record the requests, then take decisions one by one until none is pending, the deadline passes or cancel.
    Each wait races a decision, the deadline and cancel afresh (see `orchestrators.external_events`)."""
    if isinstance(command, RequestApproval):
        requests = driver.approval_requests(command, context.current_utc_datetime)
        yield context.call_activity_with_retry(
            _Activities.record_approvals, ACTIVITY_RETRY, _payload(requests, "approval requests")
        )
        driver.on_approvals_recorded()
    expires_at = driver.approvals_expire_at
    assert expires_at is not None  # set by approval_requests before any wait
    next_command: LoopCommand = command
    while driver.pending_approvals:
        context.set_custom_status(_payload(driver.progress(), "custom status"))
        received_cancel = cancels.take()
        if received_cancel is not None:
            return driver.on_cancel(CancelEvent.model_validate(received_cancel).reason)
        event = approvals.take()
        if event is None:
            timer = context.create_timer(expires_at)
            yield context.task_any([approvals.waiter(), timer, cancels.waiter()])
            if timer.is_completed:
                expiry = driver.expire_input()
                result = yield context.call_activity_with_retry(
                    _Activities.expire_approvals, ACTIVITY_RETRY, _payload(expiry, "expire input")
                )
                return driver.on_expired(ExpireApprovalsResult.model_validate(result)) or next_command
            timer.cancel()
            continue  # take what arrived: cancel first, else the decision
        decision_input = driver.decision_input(ApprovalEvent.model_validate(event).approval_id)
        if decision_input is None:
            continue  # not (or no longer) pending here: the API already answered the caller
        result = yield context.call_activity_with_retry(
            _Activities.apply_decision, ACTIVITY_RETRY, _payload(decision_input, "decision input")
        )
        next_command = driver.on_decision(ApprovalDecision.model_validate(result))
    return next_command
