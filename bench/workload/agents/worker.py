"""`worker`: the agent the benchmarks and the load/fault tests run.

Tools:
- `fetch_blob(index, size)`: a large, deterministic result (stresses payload budgets and history growth);
- `record_step(key)`: a side effect recorded exactly once in the session's effect ledger; `EXECUTIONS` counts the
  raw executions in this process, so a test can tell "ran twice" (allowed: at-least-once) from "took effect twice";
- `send_email(to, subject)`: always needs approval; its effect is recorded once;
- `stuck_lookup(key)`: never finishes by itself; its timeout turns that into a tool error the model sees.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Annotated

from pydantic import Field

from agent_runtime.agents import AgentDefinition
from agent_runtime.tools import ToolContext, tool

# Raw executions per idempotency key, in this process (the in-process devhost runs activities here).
EXECUTIONS: Counter[str] = Counter()
STUCK_TOOL_TIMEOUT_SECONDS = 0.3


@tool
def fetch_blob(index: Annotated[int, Field(ge=0)], size: Annotated[int, Field(ge=0, le=1_000_000)]) -> dict:
    """Return `size` bytes of deterministic text for item `index`."""
    pattern = f"[item {index}] "
    return {"index": index, "data": (pattern * (size // len(pattern) + 1))[:size]}


@tool
async def record_step(key: Annotated[str, Field(min_length=1, max_length=200)], context: ToolContext) -> dict:
    """Record that step `key` happened (exactly once, whatever the retries)."""
    EXECUTIONS[context.idempotency_key] += 1
    stored, created = await context.record_effect_once("step", {"key": key})
    return {"key": stored["key"], "first_time": created}


@tool(approval="always")
async def send_email(
    to: Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")],
    subject: Annotated[str, Field(min_length=1, max_length=200)],
    context: ToolContext,
) -> dict:
    """Send an email (recorded in the session's effect ledger); a person approves every one."""
    EXECUTIONS[context.idempotency_key] += 1
    stored, created = await context.record_effect_once("email", {"to": to, "subject": subject})
    return {"status": "sent" if created else "already_sent", "to": stored["to"]}


@tool(timeout=STUCK_TOOL_TIMEOUT_SECONDS)
async def stuck_lookup(key: Annotated[str, Field(min_length=1, max_length=200)]) -> dict:
    """Look something up in a backend that never answers (its timeout ends the call)."""
    await asyncio.Event().wait()  # never set: only the tool timeout ends this call
    return {"key": key}


worker = AgentDefinition(
    name="worker",
    description="Benchmark and load-test agent: large tool results, recorded side effects, approvals, timeouts.",
    instructions="Do what the user asks with your tools, then answer briefly.",
    tools=[fetch_blob, record_step, send_email, stuck_lookup],
    max_iterations=500,
    include_detailed_errors=True,
)
