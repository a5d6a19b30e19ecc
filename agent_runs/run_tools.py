"""A run's agent as its steps see it: the definition plus the MCP tools discovered for that run.

Discovery happens once, in the `discover_tools` activity at the start of the run's first execution, and the list
is recorded in the run's store record (`record_run_tools`: the first list wins). Every later step - model calls,
tool calls, approval decisions, the approval route validating edited arguments - rebuilds the agent from that
record, so replays, retries, restarts and continued-as-new executions all offer the same tools and schemas.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from agent_runtime.agents import AgentDefinition
from session_store import SessionStore

_CACHE_SIZE = 256
_lock = threading.Lock()
# (id(agent definition), run id) -> (definition, bound agent). A recorded list never changes, so a bound agent can be
# reused for as long as the definition object lives (keeping it referenced here keeps its id from being reused).
_bound: OrderedDict[tuple[int, str], tuple[AgentDefinition, AgentDefinition]] = OrderedDict()


async def agent_for_run(
    store: SessionStore, agent: AgentDefinition, run_id: str, *, session_id: str | None = None
) -> AgentDefinition:
    """`agent` with the MCP tools recorded for `run_id` (the agent itself when it has no MCP servers)."""
    if not agent.mcp_servers:
        return agent
    key = (id(agent), run_id)
    with _lock:
        cached = _bound.get(key)
        if cached is not None:
            _bound.move_to_end(key)
            return cached[1]
    record = await store.get_run(run_id, session_id=session_id)
    if record is None:
        raise LookupError(f"no run {run_id!r}")
    if record.discovered_tools is None:
        # Started before the agent had MCP servers (a redeploy mid-run): it keeps the tools it started with.
        return agent
    bound = await agent.with_recorded_tools(record.discovered_tools)
    with _lock:
        _bound[key] = (agent, bound)
        while len(_bound) > _CACHE_SIZE:
            _bound.popitem(last=False)
    return bound
