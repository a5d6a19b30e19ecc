"""`finish_run`: close the run in the store (output or error, usage), leaving the session ready for the next run."""

from __future__ import annotations

import re
from typing import Any

from agent_runs.closing import expire_pending_approvals
from agent_runs.context import StepContext, overrides_of
from agent_runs.contracts import FinishInput
from agent_runs.driver import FINISH_SPARE_SLOTS
from agent_runs.sequence import run_seq_range
from agent_runs.store_log import load_session_records
from agent_runtime.messages import Message, last_assistant_text
from agent_runtime.steps import close_unresolved_calls_step

_CODE = re.compile(r"^([a-z][a-z0-9_]*):\s*(.*)$", re.DOTALL)


async def finish_run(payload: dict[str, Any]) -> dict[str, Any]:
    step = FinishInput.model_validate(payload)
    ctx = StepContext.for_run(step.run)
    finish = step.finish
    slots = len(finish.unresolved) + 1 + FINISH_SPARE_SLOTS  # as reserved by the driver
    await close_unresolved_calls_step(ctx.run_log(step.first_seq, slots), step.run.run_id, finish)
    output: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    if finish.status == "completed":
        output = await _output(ctx)
    else:
        error = _error(finish.status, finish.reason)
    await ctx.store.finish_run(
        step.run.run_id, finish.status, output=output, error=error, usage=step.usage.model_dump(mode="json")
    )
    await expire_pending_approvals(ctx.store, step.run.run_id, finish.status)
    return {}


async def _output(ctx: StepContext) -> dict[str, Any]:
    first, last = run_seq_range(ctx.run.ordinal)
    records = await load_session_records(ctx.store, ctx.run.session_id, after_seq=first - 1, up_to_seq=last)
    text = last_assistant_text([Message.model_validate(record.payload) for record in records])
    output: dict[str, Any] = {"text": text}
    agent = ctx.agent
    overrides = overrides_of(await ctx.record())
    if agent.output_type is not None or overrides.has_output_format:
        try:
            value = overrides.parse_output(agent, text)
            output["value"] = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
        except ValueError as exc:  # pydantic's ValidationError and json's JSONDecodeError are ValueErrors
            output["value_error"] = str(exc).split("\n", 1)[0]
    return output


def _error(status: str, reason: str) -> dict[str, Any]:
    match = _CODE.match(reason)
    if match:
        return {"code": match.group(1), "message": match.group(2) or reason}
    return {"code": reason if re.fullmatch(r"[a-z_]+", reason) else status, "message": reason}
