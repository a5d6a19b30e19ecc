"""`run_middleware_before`: the run middleware's pre-processing, once per run (its post-processing is in
`finish_run`). Returns whether the run proceeds, or how the middleware ended it."""

from __future__ import annotations

from typing import Any

from agent_runs.budget import within_budget
from agent_runs.context import StepContext
from agent_runs.contracts import MiddlewareBeforeInput, MiddlewareBeforeResult
from agent_runs.run_middleware import before_phase


async def run_middleware_before(payload: dict[str, Any]) -> dict[str, Any]:
    step = MiddlewareBeforeInput.model_validate(payload)
    record = await before_phase(StepContext.for_run(step.run), step.first_seq, step.slots)
    result = MiddlewareBeforeResult(
        proceed=record.proceed,
        status=record.status,  # type: ignore[arg-type]
        reason=record.reason[:1000],
    )
    return within_budget(result.model_dump(mode="json"), "run_middleware_before result")
