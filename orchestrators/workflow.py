"""The `workflow` orchestrator: a workflow run, step by step, as durable tasks.

A thin generator over the sans-IO `WorkflowDriver`: it asks for the next command, runs it (`StepRunner` in
`workflow_steps.py`) and feeds the result back; it continues as new when the driver says so (eternal monitors run
at a flat replay cost) and closes the run with `workflow_finish`. Replay-safe: time comes from
`context.current_utc_datetime`; every race gets fresh waiters and timers (see `orchestrators.external_events`);
definitions are code, loaded from the package the input names (no setting is read on replay). A failure of our own
code path (an activity that failed for good, a payload over the budget) ends the workflow `failed` with a stable
code, never an orchestrator crash.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import azure.durable_functions as df

from agent_runs.budget import PayloadBudgetExceeded, within_budget
from orchestrators.failures import PAYLOAD_TOO_LARGE, report
from orchestrators.workflow_steps import Activities, StepRunner
from workflow_runtime.contracts import WorkflowInput
from workflow_runtime.driver import ContinueAsNew, Done, Sleep, WorkflowDriver
from workflow_runtime.registry import package_workflows


def workflow(context: df.DurableOrchestrationContext) -> Generator[Any, Any, dict[str, Any]]:
    workflow_input = WorkflowInput.model_validate(context.get_input())
    definition = package_workflows(workflow_input.ref.package).get(workflow_input.ref.workflow)
    driver = WorkflowDriver(definition, workflow_input)
    runner = StepRunner(context, driver)
    try:
        done = yield from _steps(context, driver, runner)
    except PayloadBudgetExceeded as error:  # the progress or the continue-as-new input outgrew the budget
        done = driver.on_failure(PAYLOAD_TOO_LARGE, report(context, PAYLOAD_TOO_LARGE, "the workflow", error))
    if done is None:
        return {}  # continued as new
    request = _finish_request(driver, done)
    if request is None:  # the references the output needs outgrew the budget
        error = PayloadBudgetExceeded("the finish request is over the payload budget")
        done = driver.on_failure(PAYLOAD_TOO_LARGE, report(context, PAYLOAD_TOO_LARGE, "the workflow", error))
        request = _finish_request(driver, done)
        assert request is not None  # a failure needs no references
    runner.publish_final()
    yield runner.activity(Activities.finish, request)
    outcome = driver.outcome(done)
    runner.publish_final()
    return outcome.model_dump(mode="json")


def _finish_request(driver: WorkflowDriver, done: Done) -> dict[str, Any] | None:
    """What `workflow_finish` needs: the step references only when it resolves the output (a completed workflow);
    None when that is over the budget."""
    request = driver.finish_request(done)
    if done.status != "completed":
        request = request.model_copy(update={"refs": {}})
    try:
        return within_budget(request.model_dump(mode="json"), "finish request")
    except PayloadBudgetExceeded:
        return None


def _steps(context: df.DurableOrchestrationContext, driver: WorkflowDriver, runner: StepRunner) -> Generator[
    Any, Any, Done | None
]:
    """Run steps until the workflow is done (its `Done`), or it continued as new (None)."""
    while True:
        command = driver.next_command(context.current_utc_datetime)
        if isinstance(command, Done):
            return command
        if runner.cancel_received():  # arrived while no race was on (during an activity, between steps)
            driver.on_cancel()
            continue
        if isinstance(command, ContinueAsNew):
            context.continue_as_new(within_budget(command.input.model_dump(mode="json"), "continue-as-new input"))
            return None
        runner.publish()
        if isinstance(command, Sleep):  # a monitor's pause between checks
            if (yield from runner.sleep(command.until)):
                driver.on_cancel()
            else:
                driver.on_slept()
            continue
        result = yield from runner.run(command)
        if result is None:
            driver.on_cancel()
        else:
            driver.on_result(result, context.current_utc_datetime)

