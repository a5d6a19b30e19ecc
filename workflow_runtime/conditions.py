"""Evaluating a step's condition against the store's data (branch tests, monitor `until`)."""

from __future__ import annotations

from typing import Any

from workflow_runtime.contracts import StepRequest, StepResult
from workflow_runtime.definition import MonitorStep
from workflow_runtime.journal import WorkflowContext
from workflow_runtime.references import Condition, UnresolvedReference


def evaluate(condition: Condition, data: dict[str, Any]) -> tuple[bool, str | None]:
    """The condition's value; a reference that does not resolve counts as false (and is reported)."""
    try:
        return condition.evaluate(data), None
    except UnresolvedReference as error:
        return False, str(error)


def iteration_of(key: str) -> int:
    return int(key.rsplit(".", 1)[1])


async def monitor_facts(
    ctx: WorkflowContext, request: StepRequest, step: MonitorStep, output: Any
) -> tuple[dict[str, Any], StepResult]:
    """A monitor check's journal output (the check's output + iteration facts) and whether `until` now holds."""
    iteration = iteration_of(request.key)
    full: dict[str, Any] = {
        **(output if isinstance(output, dict) else {"value": output}),
        "iteration": iteration,
        "checks": iteration + 1,
    }
    data = await ctx.data(request.refs)
    data["steps"][step.id] = full
    met, problem = evaluate(step.until, data)
    full["condition_met"] = met
    if problem:
        full["condition_error"] = problem
    return full, StepResult(step_id=request.step_id, status="ok", condition=met)
