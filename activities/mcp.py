"""`discover_tools`: list the agent's MCP tools once for a run and record them with the run (first list wins)."""

from __future__ import annotations

from agent_runs.context import StepContext
from agent_runs.contracts import RunRef, StepFailure, ToolDiscoveryResult, ToolsDiscovered
from agent_runs.finishing import closed_as
from agent_runtime.mcp.config import McpConfigurationError
from agent_runtime.run_result import error_of
from durable_steps import activity
from session_store.records import RunRecord

DISCOVERY_FAILED = "tool_discovery_failed"


@activity(compact=True)
async def discover_tools(run: RunRef) -> ToolDiscoveryResult:
    """How many tools were recorded (and which optional servers and how many tools were left out: the run's record
    and view name them and say why), or a `StepFailure` when a required server cannot be listed (after the client's
    own retries) or every tool it allows was left out: the run then fails with a reason naming the server and why.
    A run closed before (given up by its start) lists nothing: a `StepFailure` with how its record says it ended."""
    from agent_runtime.mcp.discovery import McpDiscoveryError
    from agent_runtime.mcp.discovery import discover_tools as discover

    ctx = StepContext.for_run(run)
    record = await ctx.store.get_run(run.run_id)
    if record is not None and record.discovered_tools is not None:  # a retry: the first list stands
        return _discovered(record)
    closed = closed_as(record)
    if closed is not None:
        # Closed before its first step (a start answered as failed whose orchestration the host started all the
        # same): no server is listed, nothing is recorded, and the run ends as its record says (`finish_run`).
        return StepFailure(**error_of(closed.status, closed.reason))
    agent = ctx.agent
    try:
        discovered = await discover(agent.mcp_servers, [t.name for t in agent.tools])
    except (McpDiscoveryError, McpConfigurationError) as error:
        return StepFailure(code=DISCOVERY_FAILED, message=str(error))
    stored = await ctx.store.record_run_tools(  # one write: the tools, and the tools and servers left out
        run.run_id,
        [spec.model_dump(mode="json") for spec in discovered.tools],
        discovered.recorded_skips(),
        discovered.recorded_server_skips(),
    )
    return _discovered(stored)


def _discovered(record: RunRecord) -> ToolsDiscovered:
    """What the run recorded (the first list, when discovery ran before)."""
    return ToolsDiscovered(
        tools=len(record.discovered_tools or []),
        skipped_servers=[str(skipped.get("server")) for skipped in record.skipped_servers],
        skipped_tools=len(record.skipped_tools),
    )
