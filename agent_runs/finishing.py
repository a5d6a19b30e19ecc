"""Closing a run at the end of its loop: what `finish_run` does, and what `call_model` does instead when its answer
ends the loop (the run then needs no `finish_run` activity, nor the orchestrator episode that would schedule it).

The run's result is built as the in-process runner builds it (`build_run_result`: structured output that does not
validate fails the run with `invalid_structured_output`), then post-processed by the run middleware when the run got
past its pre-processing. The store keeps the first finish (`rules.finish`), so a retried close changes nothing.
"""

from __future__ import annotations

import functools
from typing import Any

from agent_runs.closing import expire_pending_approvals
from agent_runs.context import StepContext, overrides_of
from agent_runs.contracts import ClosedModelTurn, FinishInput, FinishResult, ModelCallInput
from agent_runs.driver import FINISH_SPARE_SLOTS
from agent_runs.failed_attempts import counting_failed_attempts
from agent_runs.run_middleware import after_phase
from agent_runtime.check_threads import check_off_loop
from agent_runtime.loop import AgentLoop
from agent_runtime.loop_types import Finish, ModelTurn
from agent_runtime.messages import Usage, last_assistant_text
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
from session_store import RunRecord
from telemetry.spans import emit_run_span

_FINAL = ("completed", "failed", "cancelled")


async def close_run(ctx: StepContext, step: FinishInput, record: RunRecord | None) -> FinishResult:
    """Close the run in the store (output or error, usage), leaving the session ready for the next run. `record`: the
    run as just read (its output format, and the ETag to finish it). Returns the final status and reason (they may
    differ from the loop's)."""
    finish = step.finish
    # The loop's usage, and when it ended waiting for a model call's answer, what the call's failed attempts were
    # billed: the turn that never came would have counted them.
    usage = counting_failed_attempts(step.usage, record, finish.unanswered_call)
    slots = len(finish.unresolved) + 1 + FINISH_SPARE_SLOTS  # as reserved by the driver
    # One read of the run's messages (or none: the conversation cache) serves both uses below.
    log = ctx.closing_run_log(step.first_seq, slots, record=record)
    await close_unresolved_calls_step(log, step.run.run_id, finish)
    # The run middleware gets the result with its messages: copies; otherwise they are only read.
    added = await (log.messages() if step.run_middleware == "after" else log.read())
    flagged = record.flagged_cancel_error if record is not None else None
    if flagged is not None:
        # Its cancel was flagged: the store writes the close `cancelled` whatever it asks (`rules.finish`), so the
        # result, and the run middleware's post-processing, are of that end, not of the one the loop reached first;
        # and with the flag's reason, also when the loop ended cancelled by a step that saw the flag (a model call).
        finish = finish.model_copy(update={"status": "cancelled", "reason": flagged["message"]})
    if step.run_middleware == "ended":  # the middleware answered before the run started: taken as it is
        result = RunResult(
            run_id=step.run.run_id, status=finish.status, reason=finish.reason, text=last_assistant_text(added)
        )
    else:
        overrides = overrides_of(record)
        build = functools.partial(
            build_run_result, ctx.agent, step.run.run_id, finish.status, finish.reason, usage, added,
            overrides=overrides,
        )
        # A client's schema checking the answer is bounded work but not small: off the event loop. Without a format
        # the result is bookkeeping, not worth a thread hop (about a quarter of this step's time on a 2-core VM).
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
    stored = await ctx.store.finish_run(
        step.run.run_id, status, output=output, error=error, usage=usage.model_dump(mode="json"), current=record
    )
    ctx.services.conversations.forget(step.run.session_id, step.run.run_id)  # the run is over
    if status != "cancelled" and stored.error is not None and stored.error == stored.flagged_cancel_error:
        # Its cancel was flagged: the store closed it `cancelled` instead (`rules.finish`), so that is how it ended.
        status, error = "cancelled", stored.error
        reason = str(error["message"])
    if (stored.status, stored.error) != (status, error):
        # Closed before (the store keeps the first finish): by the model call whose answer ended the loop while a
        # cancel won the orchestrator's race and its grace ran out. The run ended as the store says.
        return _result_of(stored)
    if step.approvals_asked:  # a run that never asked for one has none to expire
        await expire_pending_approvals(ctx.store, step.run.run_id, status, session_id=step.run.session_id)
    emit_run_span(
        step.run.trace,
        run_id=step.run.run_id,
        session_id=step.run.session_id,
        agent=step.run.agent,
        status=status,
        reason=reason,
        usage=usage,
    )
    return FinishResult(status=status, reason=reason[:1000])  # type: ignore[arg-type]


async def close_if_final(
    ctx: StepContext, step: ModelCallInput, turn: ModelTurn, *, record: RunRecord | None = None
) -> ClosedModelTurn | None:
    """Close the run when `turn` is a final answer, as `finish_run` would right after (None: the loop goes on, or the
    orchestrator closes the run as before).

    The loop is pure: given the state it had when the call was made (`step.close`) and this turn, it decides here
    exactly what the orchestrator's loop decides on replay. Only an answer without tool calls, not ended by chat
    middleware: a call redelivered before its close asks the model again and replaces the stored answer in place, so
    the close must write nothing tied to this answer's calls (a "not run" result for a call the new answer does not
    make would be left without its call). A run whose cancel was requested meanwhile is left to the orchestrator,
    which ends it `cancelled` (the store would: `rules.finish`) once the cancel event or this answer reaches it.
    `record`: the run as read after the model answered (by the check before its answer was stored); read here
    otherwise."""
    close = step.close
    if close is None or turn.tool_calls or turn.terminated:
        return None
    command = AgentLoop(state=close.loop_state).send(turn)  # the state was parsed for this attempt: it may change
    if not isinstance(command, Finish) or command.unresolved:
        return None
    if record is None:
        record = await ctx.record()  # read again: a cancel request may have arrived while the model answered
    if record is None or record.cancel_requested_at is not None or record.finished:
        return None
    finish_input = FinishInput(
        run=step.run,
        finish=command,
        first_seq=close.first_seq,
        usage=command.usage,
        approvals_asked=close.approvals_asked,
    )
    return ClosedModelTurn(turn=turn, finished=await close_run(ctx, finish_input, record))


async def ended_before(ctx: StepContext, record: RunRecord | None) -> ClosedModelTurn | None:
    """`closed_before`, with the close it finds completed: a store that writes a run's close and its session's
    release in two operations (Cosmos) may have been stopped between them (the host killed, the release refused), and
    the retried closing call is what runs next - the store's `finish_run` repeated changes nothing of the run and
    releases its session (before, the session stayed held by the finished run until a start's grace released it)."""
    closed = closed_before(record)
    if closed is not None and record is not None:
        await ctx.store.finish_run(record.run_id, record.status, current=record)
    return closed


def closed_before(record: RunRecord | None) -> ClosedModelTurn | None:
    """How a run that is over was closed (the store kept it), so no model call asks the model again: a retried closing
    call whose earlier attempt closed it, or a call of a run closed before the call (a start answered as failed whose
    orchestration the host started all the same). None while the run is open."""
    finished = closed_as(record)
    if finished is None:
        return None
    usage = Usage.model_validate(record.usage) if record.usage else Usage()
    finish = Finish(status=finished.status, reason=finished.reason, usage=usage)
    return ClosedModelTurn(finish=finish, finished=finished)


def closed_as(record: RunRecord | None) -> FinishResult | None:
    """How a run (or workflow) that is over ended, as its record says (the store keeps the first finish); None while
    it is open. What the first step of an orchestration that started after its run was given up (a start answered as
    failed that the host took all the same) ends with, doing nothing else: a model call, the run middleware's
    pre-processing, MCP tool discovery, a workflow's first step."""
    if record is None or not record.finished or record.status not in _FINAL:
        return None
    return _result_of(record)


def _result_of(record: RunRecord) -> FinishResult:
    """How a closed run ended, read back from its record (`error_of` in reverse: the reason a run reports)."""
    status: Any = record.status
    if status == "completed":
        reason = str((record.output or {}).get("finish_reason") or "stop")
    else:
        error = record.error or {}
        code, message = str(error.get("code") or status), str(error.get("message") or "")
        reason = code if message in ("", code) else message if code == status else failure_reason(code, message)
    return FinishResult(status=status, reason=reason[:1000])
