"""The `tools` a client may declare: the agent's own tools, as one hosted MCP server labelled with the agent's name.

The approval requests of a run are `mcp_approval_request` items with `server_label` = the agent's name, and the
OpenAI Agents SDK answers them only for a `HostedMCPTool` of that label, so a client may declare
`{"type": "mcp", "server_label": "<agent>", ...}`. It names the tools the server already has: nothing is ever fetched
(`server_url`, `connector_id`, `headers`, `authorization` are refused), and it can only narrow the run
(`allowed_tools`: fewer tools; `require_approval`: more approvals). A `never` cannot loosen what the server asks:
the server's policy still holds calls that need a person. Other tools (functions, web search, ...) are refused:
tools run on the server, where the agent declares them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_runtime.agents import AgentDefinition
from agent_runtime.tool_policy import MAX_TOOL_NAMES, ToolName, ToolPolicy
from http_api.openai_responses.errors import openai_error, unsupported
from http_api.problems import validation_problem

# What would make this server reach out to another MCP server (or pass a client's credentials on): never.
REMOTE_FIELDS = ("server_url", "connector_id", "headers", "authorization")
MAX_TOOLS = 8


class ToolFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool_names: Annotated[list[ToolName], Field(max_length=MAX_TOOL_NAMES)] | None = None
    read_only: bool | None = None


class ApprovalFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    always: ToolFilter | None = None
    never: ToolFilter | None = None  # cannot loosen the server's policy: accepted, changes nothing


class HostedMcpTool(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["mcp"]
    server_label: str
    server_description: str | None = None
    allowed_tools: Annotated[list[ToolName], Field(max_length=MAX_TOOL_NAMES)] | ToolFilter | None = None
    require_approval: Literal["always", "never"] | ApprovalFilter | None = None


def tool_policy(tools: list[dict[str, Any]] | None, agent: AgentDefinition) -> ToolPolicy | None:
    """The run's narrowing of the agent's tools from the declared `tools` (None: none declared); 400 naming the
    tool at fault otherwise."""
    if not tools:
        return None
    if len(tools) > MAX_TOOLS:
        raise openai_error(400, f"At most {MAX_TOOLS} tools.", param="tools")
    policy: ToolPolicy | None = None
    for index, raw in enumerate(tools):
        param = f"tools[{index}]"
        kind = raw.get("type") if isinstance(raw, dict) else None
        if kind != "mcp":
            raise unsupported(
                f"{param}.type",
                f"tools of type '{kind}' are not supported: an agent's tools run on the server, where the agent "
                f"declares them. Declare them as {{'type': 'mcp', 'server_label': '{agent.name}'}} to narrow them "
                "or to answer their approval requests.",
            )
        for name in REMOTE_FIELDS:
            if raw.get(name) is not None:
                raise unsupported(
                    f"{param}.{name}",
                    "this server connects to no MCP server a request names; the only MCP server here is the agent's "
                    f"own tools, server_label '{agent.name}', without '{name}'.",
                )
        try:
            declared = HostedMcpTool.model_validate(raw)
        except ValidationError as error:
            problem = validation_problem(error, prefix=param, data=raw)
            where = problem.field or param
            raise openai_error(400, f"Invalid '{where}': {problem.invalid_params[0].reason}", param=where) from error
        if declared.server_label != agent.name:
            raise openai_error(
                400,
                f"Invalid '{param}.server_label': the only MCP server here is the agent's own tools, server_label "
                f"'{agent.name}' (got '{declared.server_label}').",
                param=f"{param}.server_label",
            )
        if policy is not None:
            raise openai_error(400, f"Invalid '{param}': server_label '{agent.name}' is declared twice.", param=param)
        policy = _policy(declared, agent, param)
    return policy


def _names(value: list[str] | ToolFilter | None) -> list[str] | None:
    if value is None:
        return None
    return value if isinstance(value, list) else value.tool_names


def _policy(declared: HostedMcpTool, agent: AgentDefinition, param: str) -> ToolPolicy:
    known = {tool.name for tool in agent.tools}
    allowed = _names(declared.allowed_tools)
    if isinstance(declared.allowed_tools, ToolFilter) and declared.allowed_tools.read_only:
        raise unsupported(f"{param}.allowed_tools.read_only", "tools here do not say whether they are read-only")
    approve_all = declared.require_approval == "always"
    approve: list[str] = []
    if isinstance(declared.require_approval, ApprovalFilter) and declared.require_approval.always is not None:
        approve = declared.require_approval.always.tool_names or []
        approve_all = declared.require_approval.always.tool_names is None
    for names, where in ((allowed or [], "allowed_tools"), (approve, "require_approval.always.tool_names")):
        unknown = [name for name in names if name not in known]
        if unknown and not agent.mcp_servers:  # an agent with MCP servers discovers more tools when a run starts
            raise openai_error(
                400,
                f"Invalid '{param}.{where}': agent '{agent.name}' has no tool {', '.join(map(repr, unknown))} "
                f"(its tools: {', '.join(sorted(known)) or 'none'}).",
                param=f"{param}.{where}",
            )
    return ToolPolicy(allowed=allowed, approve_all=approve_all, approve=approve)


def declared_tools(policy: ToolPolicy | None, agent_name: str) -> list[dict[str, Any]]:
    """The `tools` of a response: the declaration its run follows, as the client sent it in substance."""
    if policy is None:
        return []
    tool: dict[str, Any] = {"type": "mcp", "server_label": agent_name}
    if policy.allowed is not None:
        tool["allowed_tools"] = list(policy.allowed)
    if policy.approve_all:
        tool["require_approval"] = "always"
    elif policy.approve:
        tool["require_approval"] = {"always": {"tool_names": list(policy.approve)}}
    return [tool]
