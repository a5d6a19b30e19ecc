"""`invoke_tool`: one tool call (validated arguments, function middleware, idempotency key, the result stored)."""

from __future__ import annotations

from typing import Any

from agent_runs.budget import within_budget
from agent_runs.context import StepContext
from agent_runs.contracts import ToolCallInput
from agent_runs.effects import StoreEffectLedger
from agent_runs.store_log import RunClosedError
from agent_runtime.loop_types import ToolOutcome
from agent_runtime.steps import invoke_tool_step


async def invoke_tool(payload: dict[str, Any]) -> dict[str, Any]:
    step = ToolCallInput.model_validate(payload)
    ctx = StepContext.for_run(step.run)
    try:
        outcome = await invoke_tool_step(
            await ctx.run_agent(),
            ctx.open_run_log(step.seq, 1),
            step.run.run_id,
            step.invocation,
            session_id=step.run.session_id,
            effects=StoreEffectLedger(ctx.store, step.run.session_id),
        )
    except RunClosedError:  # abandoned by a cancel: nobody waits for this result any more
        outcome = ToolOutcome(call_id=step.invocation.call_id, is_error=True)
    return within_budget(outcome.model_dump(mode="json"), "invoke_tool result")
