"""The `workflow` orchestrator: a workflow run, step by step, as durable tasks.

It only translates the `WorkflowDriver`'s requests into durable tasks (activities through their declarations,
child runs, timers, waits for events: `orchestrators.workflow_waits`) and feeds back what happened; the driver
decides everything else. A request that fails (an activity that failed for good, a payload over the budget) is fed
back as `Failed` with a stable code and a message safe for clients (`orchestrators.failures`): the workflow ends
`failed`, never with an orchestrator crash. Replay-safe: time comes from `context.current_utc_datetime`, which the
driver is told with every event; definitions are code, loaded from the package the input names (no setting is read
on replay).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Literal

import azure.durable_functions as df

from agent_runs.budget import CUSTOM_STATUS_BUDGET_BYTES, PayloadBudgetExceeded, within_budget
from notifications.hooks import notify
from orchestrators.external_events import ExternalEvents
from orchestrators.failures import is_store_outage, reported
from orchestrators.workflow_waits import WorkflowWaits
from workflow_runtime.contracts import WorkflowInput, WorkflowRef
from workflow_runtime.driver import WorkflowDriver
from workflow_runtime.registry import package_workflows
from workflow_runtime.requests import (
    ActivityCompleted,
    CallActivity,
    CheckSignal,
    ContinueAsNew,
    DrainChildRuns,
    Event,
    Failed,
    Finished,
    Pause,
    Request,
    RunChildRuns,
    Sleep,
    TakeCancel,
    WaitForDecision,
    WaitForSignal,
)

# The gate activities: after each, the workflow's approval events are recorded (`notifications`).
NOTIFYING_ACTIVITIES = frozenset({"workflow_open_gate", "workflow_expire_gate", "workflow_record_gate"})


def workflow(context: df.DurableOrchestrationContext) -> Generator[Any, Any, dict[str, Any]]:
    workflow_input = WorkflowInput.model_validate(context.get_input())
    definition = package_workflows(workflow_input.ref.package).get(workflow_input.ref.workflow)
    driver = WorkflowDriver(definition, workflow_input)
    waits = WorkflowWaits(context, lambda: _publish(context, driver))
    request = driver.start(context.current_utc_datetime)
    while not isinstance(request, Finished):
        try:
            event = yield from _carry_out(context, waits, request, driver.notify_seq)
        except Exception as error:
            step = driver.active_step
            code, message = reported(context, f"step '{step}'" if step else "the workflow", error)
            event = Failed(code=code, message=message, outage=is_store_outage(error))
        if event is None:
            return {}  # continued as new
        request = driver.send(event, context.current_utc_datetime)
    _publish(context, driver)
    # Also a workflow closed before its steps (given up by its start, which the host took all the same): its end's
    # event says so, as a given-up agent run's does. Histories from before that ended so completed in that episode.
    yield from _notify(context, workflow_input.ref, "finished", driver.notify_seq)
    return request.outcome.model_dump(mode="json")


def _notify(
    context: df.DurableOrchestrationContext, ref: WorkflowRef, what: Literal["approvals", "finished"], seq: int,
    cancels: ExternalEvents | None = None,
) -> Any:
    """Record the workflow's events (a gate opened, decided or expired; its end) and wake their deliveries; `seq`:
    the workflow's position, their order. `cancels`: while the workflow runs, a failing recording's waits race
    cancel, as its other waits do (the cancel is left for the driver to take)."""
    return notify(context, ref, run_id=ref.run_id, session_id=ref.control_session, agent=ref.workflow, what=what,
                  seq=seq, cancels=cancels)


def _carry_out(
    context: df.DurableOrchestrationContext, waits: WorkflowWaits, request: Request, notify_seq: int
) -> Generator[Any, Any, Event | None]:
    """Run one request as durable tasks; what happened, or None once the execution continued as new. `notify_seq`:
    the workflow's position, which orders the notifications a gate activity records."""
    if isinstance(request, CallActivity):
        task = request.activity.call(context, request.input)
        waits.publish()
        completed = ActivityCompleted(output=request.activity.parse((yield task)))
        if request.activity.name in NOTIFYING_ACTIVITIES:
            yield from _notify(context, request.input.ref, "approvals", notify_seq, waits.cancels())
        return completed
    if isinstance(request, TakeCancel):
        return waits.take_cancel()
    if isinstance(request, CheckSignal):
        return waits.check_signal(request.events)
    if isinstance(request, RunChildRuns):
        return (yield from waits.run_children(request.runs, request.fail_fast))
    if isinstance(request, DrainChildRuns):
        return (yield from waits.drain_children())
    if isinstance(request, Sleep):
        return (yield from waits.sleep(request.until))
    if isinstance(request, Pause):
        return (yield from waits.pause(request.until))
    if isinstance(request, WaitForSignal):
        return (yield from waits.wait_for_signal(request.events, request.until))
    if isinstance(request, WaitForDecision):
        return (yield from waits.wait_for_decision(request.event, request.until))
    if isinstance(request, ContinueAsNew):
        context.continue_as_new(within_budget(request.input.model_dump(mode="json"), "continue-as-new input"))
        return None
    raise TypeError(f"unexpected workflow request {request!r}")  # pragma: no cover - the vocabulary is closed


def _publish(context: df.DurableOrchestrationContext, driver: WorkflowDriver) -> None:
    """The driver's progress as the custom status; over the budget (a long reason...), shortened rather than lost."""
    progress = driver.progress()
    try:
        context.set_custom_status(
            within_budget(progress.model_dump(mode="json"), "custom status", CUSTOM_STATUS_BUDGET_BYTES)
        )
    except PayloadBudgetExceeded:
        short = progress.model_copy(update={"reason": (progress.reason or "")[:200], "child_runs": []})
        context.set_custom_status(short.model_dump(mode="json"))
