"""`run_middleware_before`: the run middleware's pre-processing, once per run (its post-processing is in
`finish_run`). Returns whether the run proceeds, or how the middleware ended it."""

from __future__ import annotations

from agent_runs.context import StepContext
from agent_runs.contracts import FinishResult, MiddlewareBeforeInput, MiddlewareBeforeResult
from agent_runs.finishing import closed_as
from agent_runs.run_middleware import before_phase
from durable_steps import activity


@activity(compact=True)
async def run_middleware_before(step: MiddlewareBeforeInput) -> MiddlewareBeforeResult:
    ctx = StepContext.for_run(step.run)

    async def closed() -> FinishResult | None:
        # Given up before its orchestration started (a start answered as failed that the host took all the same):
        # no middleware runs, nothing is written to the session, and the run ends as its record says.
        return closed_as(await ctx.record())

    record = await before_phase(ctx, step.first_seq, step.slots, closed=closed)
    return MiddlewareBeforeResult(
        proceed=record.proceed,
        status=record.status,  # type: ignore[arg-type]
        reason=record.reason[:1000],
    )
