"""`invoke_tool`: one tool call (validated arguments, function middleware, idempotency key, the result stored)."""

from __future__ import annotations

from agent_runs.context import StepContext
from agent_runs.contracts import ToolCallInput
from agent_runs.effects import StoreEffectLedger
from agent_runs.store_log import RunClosedError
from agent_runtime.agents import AgentDefinition
from agent_runtime.loop_types import ToolOutcome
from agent_runtime.steps import invoke_tool_step
from durable_steps import activity
from telemetry.spans import mark_error, run_step, tool_span


@activity(compact=True)
async def invoke_tool(step: ToolCallInput) -> ToolOutcome:
    ctx = StepContext.for_run(step.run)
    invocation = step.invocation
    agent = await ctx.run_agent()
    with run_step(step.run.trace, step.run.run_id):
        if invocation.action == "deny":  # not executed: the `await_approval` span records the rejection
            outcome = await _invoke(ctx, agent, step)
        else:
            with tool_span(agent.name, invocation.name, invocation.call_id) as span:
                outcome = await _invoke(ctx, agent, step)
                if outcome.is_error:
                    mark_error(span, "unknown_tool" if invocation.action == "unknown" else "tool_error")
    return outcome


async def _invoke(ctx: StepContext, agent: AgentDefinition, step: ToolCallInput) -> ToolOutcome:
    log = ctx.open_run_log(step.seq, 1, call_id=step.invocation.call_id)
    try:
        outcome = await invoke_tool_step(
            agent,
            log,
            step.run.run_id,
            step.invocation,
            session_id=step.run.session_id,
            effects=StoreEffectLedger(ctx.store, step.run.session_id),
        )
    except RunClosedError:  # abandoned by a cancel: nobody waits for this result any more
        return ToolOutcome(call_id=step.invocation.call_id, is_error=True)
    await log.settle()  # one slot, one result: nothing an earlier attempt wrote there is unknown to the log
    return outcome
