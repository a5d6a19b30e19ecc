"""`finish_run`: close the run in the store (output or error, usage), leaving the session ready for the next run.

The run's result is built as the in-process runner builds it (`build_run_result`: structured output that does not
validate fails the run with `invalid_structured_output`), then post-processed by the run middleware when the run got
past its pre-processing. Returns the final status and reason (they may differ from the loop's)."""

from __future__ import annotations

from typing import Any

from agent_runs.closing import expire_pending_approvals
from agent_runs.context import StepContext, overrides_of
from agent_runs.contracts import FinishInput, FinishResult
from agent_runs.driver import FINISH_SPARE_SLOTS
from agent_runs.run_middleware import after_phase
from agent_runs.sequence import run_seq_range
from agent_runs.store_log import load_session_records
from agent_runtime.messages import Message, last_assistant_text
from agent_runtime.run_middleware import RUN_MIDDLEWARE_INVALID_RESULT
from agent_runtime.run_result import (
    INVALID_STRUCTURED_OUTPUT,
    RunResult,
    build_run_result,
    error_of,
    failure_reason,
)
from agent_runtime.steps import close_unresolved_calls_step
from durable_steps import activity
from telemetry.spans import emit_run_span

_FINAL = ("completed", "failed", "cancelled")


@activity()
async def finish_run(step: FinishInput) -> FinishResult:
    ctx = StepContext.for_run(step.run)
    finish = step.finish
    slots = len(finish.unresolved) + 1 + FINISH_SPARE_SLOTS  # as reserved by the driver
    await close_unresolved_calls_step(ctx.run_log(step.first_seq, slots), step.run.run_id, finish)
    added = await _run_messages(ctx)
    if step.run_middleware == "ended":  # the middleware answered before the run started: taken as it is
        result = RunResult(
            run_id=step.run.run_id, status=finish.status, reason=finish.reason, text=last_assistant_text(added)
        )
    else:
        overrides = overrides_of(await ctx.record())  # the run's own output format, if it was started with one
        result = build_run_result(
            ctx.agent, step.run.run_id, finish.status, finish.reason, step.usage, added, overrides=overrides
        )
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
        step.run.run_id, status, output=output, error=error, usage=step.usage.model_dump(mode="json")
    )
    await expire_pending_approvals(ctx.store, step.run.run_id, status)
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


async def _run_messages(ctx: StepContext) -> list[Message]:
    first, last = run_seq_range(ctx.run.ordinal)
    records = await load_session_records(ctx.store, ctx.run.session_id, after_seq=first - 1, up_to_seq=last)
    return [Message.model_validate(record.payload) for record in records]
