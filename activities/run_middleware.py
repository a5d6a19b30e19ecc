"""`run_middleware_before`: the run middleware's pre-processing, once per run (its post-processing is in
`finish_run`). Returns whether the run proceeds, or how the middleware ended it."""

from __future__ import annotations

from agent_runs.context import StepContext
from agent_runs.contracts import MiddlewareBeforeInput, MiddlewareBeforeResult
from agent_runs.run_middleware import before_phase
from durable_steps import activity


@activity(compact=True)
async def run_middleware_before(step: MiddlewareBeforeInput) -> MiddlewareBeforeResult:
    record = await before_phase(StepContext.for_run(step.run), step.first_seq, step.slots)
    return MiddlewareBeforeResult(
        proceed=record.proceed,
        status=record.status,  # type: ignore[arg-type]
        reason=record.reason[:1000],
    )
