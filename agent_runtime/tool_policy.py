"""A run's narrowing of its agent's tools (e.g. the Responses API's `tools: [{"type": "mcp", ...}]` naming the agent's
own tools): only some tools offered, more calls held for approval. It only ever restricts: a tool's own approval
policy and the agent's still apply, so a client can add approvals and drop tools, never loosen what the server asks.

It travels in the run's `RunRef` (a few names; every activity applies it to the agent it works with), and in the
run's record overrides so the run's views can show it.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from .agents import AgentDefinition

ToolName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
MAX_TOOL_NAMES = 128
_CACHE_SIZE = 256
_lock = threading.Lock()
# (id(agent), policy) -> (agent, narrowed): a narrowed definition is built once (its tool schemas are the costly part).
_narrowed: OrderedDict[tuple[int, str], tuple[AgentDefinition, AgentDefinition]] = OrderedDict()


class ToolPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    allowed: Annotated[list[ToolName], Field(max_length=MAX_TOOL_NAMES)] | None = None
    """The only tools the run may call (None: all of the agent's)."""
    approve_all: bool = False
    """Every call waits for approval."""
    approve: Annotated[list[ToolName], Field(max_length=MAX_TOOL_NAMES)] = Field(default_factory=list)
    """Calls of these tools wait for approval (besides those the server's policy holds)."""

    def apply(self, agent: AgentDefinition) -> AgentDefinition:
        """`agent` for this run: only the allowed tools, the named ones (or all) held for approval."""
        key = (id(agent), self.model_dump_json())
        with _lock:
            cached = _narrowed.get(key)
            if cached is not None:
                _narrowed.move_to_end(key)
                return cached[1]
        narrowed = self._narrow(agent)
        with _lock:
            _narrowed[key] = (agent, narrowed)  # the agent is kept so its id is not reused while cached
            while len(_narrowed) > _CACHE_SIZE:
                _narrowed.popitem(last=False)
        return narrowed

    def _narrow(self, agent: AgentDefinition) -> AgentDefinition:
        tools = []
        for tool in agent.tools:
            if self.allowed is not None and tool.name not in self.allowed:
                continue
            if (self.approve_all or tool.name in self.approve) and tool.approval != "always":
                tool = copy.copy(tool)
                tool.approval = "always"
            tools.append(tool)
        fields = {name: getattr(agent, name) for name in type(agent).model_fields}
        return type(agent)(**{**fields, "tools": tools})


__all__ = ["ToolPolicy"]
