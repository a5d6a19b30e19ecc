"""The `workflow` orchestrator: a workflow run, step by step, as durable tasks.

A thin generator over the sans-IO `WorkflowDriver`: it asks for the next command, runs it (`StepRunner` in
`workflow_steps.py`) and feeds the result back; it continues as new when the driver says so (eternal monitors run
at a flat replay cost) and closes the run with `workflow_finish`. Replay-safe: time comes from
`context.current_utc_datetime`; every race gets fresh waiters and timers (see `orchestrators.external_events`);
definitions are code, loaded from the `workflows` package.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import azure.durable_functions as df

from agent_runs.budget import within_budget
from agent_runs.services import RunServices
from orchestrators.workflow_steps import Activities, StepRunner
from workflow_runtime.contracts import WorkflowInput
from workflow_runtime.driver import ContinueAsNew, Done, Sleep, WorkflowDriver
from workflow_runtime.registry import load_workflows


def workflow(context: df.DurableOrchestrationContext) -> Generator[Any, Any, dict[str, Any]]:
    workflow_input = WorkflowInput.model_validate(context.get_input())
    definition = load_workflows(RunServices.current().agents.names()).get(workflow_input.ref.workflow)
    driver = WorkflowDriver(definition, workflow_input)
    runner = StepRunner(context, driver)

    while True:
        command = driver.next_command(context.current_utc_datetime)
        if isinstance(command, Done):
            break
        if runner.cancel_received():  # arrived while no race was on (during an activity, between steps)
            driver.on_cancel()
            continue
        if isinstance(command, ContinueAsNew):
            context.continue_as_new(within_budget(command.input.model_dump(mode="json"), "continue-as-new input"))
            return {}
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

    runner.publish()
    yield runner.activity(Activities.finish, driver.finish_request(command))
    outcome = driver.outcome(command)
    runner.publish()
    return outcome.model_dump(mode="json")

