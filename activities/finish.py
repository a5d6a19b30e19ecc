"""`finish_run`: close the run in the store (output or error, usage), leaving the session ready for the next run.

The run's result is built as the in-process runner builds it (`build_run_result`: structured output that does not
validate fails the run with `invalid_structured_output`), then post-processed by the run middleware when the run got
past its pre-processing. Returns the final status and reason (they may differ from the loop's)."""

from __future__ import annotations

import functools
from typing import Any

from agent_runs.closing import expire_pending_approvals
from agent_runs.context import StepContext, overrides_of
from agent_runs.contracts import FinishInput, FinishResult
from agent_runs.driver import FINISH_SPARE_SLOTS
from agent_runs.run_middleware import after_phase
from agent_runtime.check_threads import check_off_loop
from agent_runtime.messages import last_assistant_text
from agent_runtime.run_middleware import RUN_MIDDLEWARE_INVALID_RESULT
from agent_runtime.run_result import (
    INVALID_STRUCTURED_OUTPUT,
    RunResult,
    build_run_result,
    checks_structured_output,
    error_of,
    failure_reason,
)
from agent_runtime.steps import close_unresolved_calls_step
from durable_steps import activity
from telemetry.spans import emit_run_span

_FINAL = ("completed", "failed", "cancelled")


@activity(compact=True)
async def finish_run(step: FinishInput) -> FinishResult:
    ctx = StepContext.for_run(step.run)
    finish = step.finish
    slots = len(finish.unresolved) + 1 + FINISH_SPARE_SLOTS  # as reserved by the driver
    record = await ctx.record()  # its output format (if the run was started with one), and the ETag to finish it
    # One read of the run's messages (or none: the conversation cache) serves both uses below.
    log = ctx.closing_run_log(step.first_seq, slots, record=record)
    await close_unresolved_calls_step(log, step.run.run_id, finish)
    added = await log.messages()
    if step.run_middleware == "ended":  # the middleware answered before the run started: taken as it is
        result = RunResult(
            run_id=step.run.run_id, status=finish.status, reason=finish.reason, text=last_assistant_text(added)
        )
    else:
        overrides = overrides_of(record)
        build = functools.partial(
            build_run_result, ctx.agent, step.run.run_id, finish.status, finish.reason, step.usage, added,
            overrides=overrides,
        )
        # A client's schema checking the answer is bounded work but not small: off the event loop. Without a format
        # the result is bookkeeping, not worth a thread hop (about a quarter of this activity's time on a 2-core VM).
        checks = checks_structured_output(ctx.agent, finish.status, overrides)
        result = await check_off_loop(build) if checks else build()
    status, reason, text, value = result.status, result.reason, result.text, result.value
    if step.run_middleware == "after":
        final = await after_phase(ctx, result)
        status, reason, text, value = final.status, final.reason, final.text, final.value  # type: ignore[assignment]
    if status not in _FINAL:
        status, reason = "failed", failure_reason(RUN_MIDDLEWARE_INVALID_RESULT, f"a run cannot end {status}")
    output: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    if status == "completed" or error_of(status, reason)["code"] == INVALID_STRUCTURED_OUTPUT:
        output = {"text": text}
        if value is not None:
            output["value"] = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
    if status != "completed":
        error = error_of(status, reason)
    if status == "completed":
        output = {**(output or {}), "finish_reason": finish.reason}  # e.g. "stop", "budget_exceeded"
    await ctx.store.finish_run(
        step.run.run_id, status, output=output, error=error, usage=step.usage.model_dump(mode="json"), current=record
    )
    ctx.services.conversations.forget(step.run.session_id, step.run.run_id)  # the run is over
    if step.approvals_asked:  # a run that never asked for one has none to expire
        await expire_pending_approvals(ctx.store, step.run.run_id, status, session_id=step.run.session_id)
    emit_run_span(
        step.run.trace,
        run_id=step.run.run_id,
        session_id=step.run.session_id,
        agent=step.run.agent,
        status=status,
        reason=reason,
        usage=step.usage,
    )
    return FinishResult(status=status, reason=reason[:1000])  # type: ignore[arg-type]

