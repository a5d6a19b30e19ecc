"""`finish_run`: close the run in the store (output or error, usage), leaving the session ready for the next run.

Only for a run whose loop ended anywhere but in a model call's answer (a cancel, a failure, a tool batch that ends
the run, the middleware's verdict, or histories from before `call_model` closed runs itself): see
`agent_runs.finishing`. Returns the final status and reason (they may differ from the loop's)."""

from __future__ import annotations

from agent_runs.context import StepContext
from agent_runs.contracts import FinishInput, FinishResult
from agent_runs.finishing import close_run
from durable_steps import activity


@activity(compact=True)
async def finish_run(step: FinishInput) -> FinishResult:
    ctx = StepContext.for_run(step.run)
    record = await ctx.record()  # its output format (if the run was started with one), and the ETag to finish it
    return await close_run(ctx, step, record)
