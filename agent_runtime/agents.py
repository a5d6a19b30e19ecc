"""Agent definitions and the registry that loads them from the top-level `served_agents/` package.

An agent module defines one or more `AgentDefinition`s at module level (conventionally `agent = AgentDefinition(...)`):

    agent = AgentDefinition(
        name="assistant",
        instructions="You are a helpful assistant.",
        tools=[get_weather, send_email],
        approval="never",                    # default policy for tools that set none
    )

Everything is checked when the definition is built, so a bad agent fails at start-up with a message naming the
module and the problem, never in the middle of a run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from . import json_limits
from .check_threads import check_off_loop
from .definitions import DefinitionRegistry
from .escalation import Escalate
from .loop_types import LoopConfig, RequiredFunction, ToolChoice
from .mcp.config import McpServer
from .middleware import MiddlewareLike, MiddlewarePipeline
from .models.types import ChatOptions, NamedToolChoice, ResponseFormat, ToolSpec
from .spend import RunBudget
from .tools import ApprovalPolicy, Tool, as_tool

TimeoutPolicy = Literal["reject", "fail"] | Escalate


class AgentDefinitionError(ValueError):
    """An agent definition (or the package holding them) is invalid."""


class UnknownAgentError(LookupError):
    pass


class AgentDefinition(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    instructions: str = ""
    description: str = ""
    model: str | None = None
    """Model name, or the deployment on Azure OpenAI; None = the client's configured default."""
    tools: list[Tool] = Field(default_factory=list)
    """Python tools, and `McpServer`s (moved to `mcp_servers`: their tools are discovered when a run starts)."""
    mcp_servers: list[McpServer] = Field(default_factory=list)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool | None = None
    output_type: type[BaseModel] | dict[str, Any] | None = None
    """Structured output: a pydantic model (the answer is parsed into it) or a JSON schema with an object root."""
    approval: ApprovalPolicy = "never"
    """Default approval policy for tools that do not set their own."""
    approval_timeout_seconds: float | None = Field(default=None, gt=0)
    on_approval_timeout: TimeoutPolicy = "reject"
    """What an approval deadline does to undecided calls: reject them, fail the run, or first ask someone else for a
    while: `Escalate(to=..., timeout_seconds=..., then="reject" | "fail")`."""
    max_iterations: int = Field(default=40, ge=1)
    max_consecutive_errors: int = Field(default=3, ge=1)
    terminate_on_unknown_calls: bool = False
    include_detailed_errors: bool = False
    budget: RunBudget | None = None
    """What one run may spend (model calls, tokens, cost); a request may only tighten it."""
    """Tell the model the exception text of a failed tool (off by default: it may leak internals)."""
    run_middleware: list[Any] = Field(default_factory=list)
    chat_middleware: list[Any] = Field(default_factory=list)
    function_middleware: list[Any] = Field(default_factory=list)

    @field_validator("on_approval_timeout")
    @classmethod
    def _never_approve_by_timer(cls, value: TimeoutPolicy) -> TimeoutPolicy:
        if isinstance(value, Escalate) and value.then == "approve":
            raise ValueError("an escalation of a tool approval ends with 'reject' or 'fail': a timer never approves")
        return value

    @model_validator(mode="before")
    @classmethod
    def _split_mcp_servers(cls, data: Any) -> Any:
        """`tools=[f, McpServer(...)]`: servers go to `mcp_servers`, the rest stays a tool."""
        if isinstance(data, dict) and any(isinstance(t, McpServer) for t in data.get("tools") or ()):
            data = dict(data)
            servers = [t for t in data["tools"] if isinstance(t, McpServer)]
            data["tools"] = [t for t in data["tools"] if not isinstance(t, McpServer)]
            data["mcp_servers"] = [*data.get("mcp_servers", []), *servers]
        return data

    @field_validator("tools", mode="before")
    @classmethod
    def _tools(cls, value: Iterable[Tool | Callable[..., Any]]) -> list[Tool]:
        return [as_tool(t) for t in value]

    @field_validator("run_middleware", "chat_middleware", "function_middleware")
    @classmethod
    def _middleware(cls, value: Sequence[MiddlewareLike]) -> list[Any]:
        MiddlewarePipeline(value)  # raises TypeError naming the offending object
        return list(value)

    @model_validator(mode="after")
    def _consistent(self) -> AgentDefinition:
        names = [t.name for t in self.tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate tool names: {', '.join(duplicates)}")
        required = self.tool_choice.required_function_name if isinstance(self.tool_choice, RequiredFunction) else None
        if required is not None and required not in names and not self.mcp_servers:  # MCP names: known per run
            raise ValueError(f"tool_choice names {self.tool_choice.required_function_name!r}, which is not a tool")
        servers = [s.name for s in self.mcp_servers]
        if len(set(servers)) != len(servers):
            raise ValueError(f"duplicate MCP server names: {', '.join(sorted(servers))}")
        if self.tool_choice != "auto" and self.tool_choice != "none" and not self.tools and not self.mcp_servers:
            raise ValueError("tool_choice requires a tool call but the agent has no tools")
        if isinstance(self.output_type, dict):
            self.response_format()  # a schema without an object root fails here, at definition time
        # A pydantic output type always has an object root; its strict schema (the openai SDK's converter, heavy to
        # import) is built by the first model call that needs it.
        return self

    # ------------------------------------------------------------------------------------------------ derived

    def with_discovered_tools(self, specs: Sequence[Any]) -> AgentDefinition:
        """This agent for one run: its Python tools plus the MCP tools discovered for the run (`McpToolSpec`s).
        The servers stay attached (a bound agent is not discovered again)."""
        from .mcp.tools import McpTool  # the MCP client is only needed by agents that use MCP servers

        servers = {server.name: server for server in self.mcp_servers}
        remote = [McpTool(spec, servers.get(spec.server)) for spec in specs]
        fields = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self)(**{**fields, "tools": [*self.tools, *remote]})

    async def with_recorded_tools(self, recorded: Sequence[dict[str, Any]]) -> AgentDefinition:
        """`with_discovered_tools` from the specs a run recorded (JSON), built on the checks' threads: each tool's
        validator checks the server's schema first (`mcp.tools`), about 0.1 s for a large one and up to 128 tools a
        run, while the loop serves every other run and request."""
        from .mcp.tools import McpToolSpec

        specs = [McpToolSpec.model_validate(spec) for spec in recorded]
        return await check_off_loop(self.with_discovered_tools, specs)

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    def tool_specs(self) -> list[ToolSpec]:
        """The tools as offered to the model (fresh copies: chat middleware may change them for one call)."""
        return [spec.model_copy(deep=True) for spec in self._tool_specs]

    def offered_tools(self) -> list[ToolSpec]:
        """The tools for one model call: fresh copies when chat middleware will see them (it may change them for that
        call); without middleware the definition's own specs, which model clients only read (a deep copy of every
        tool's JSON schema was ~0.3 ms of each model call)."""
        return self.tool_specs() if self.chat_middleware else list(self._tool_specs)

    def response_format(self) -> ResponseFormat | None:
        fmt = self._response_format
        return None if fmt is None else fmt.model_copy(deep=True)

    # Computed once per definition: schema generation is the costly part of preparing a model call.
    @cached_property
    def _tool_specs(self) -> tuple[ToolSpec, ...]:
        return tuple(ToolSpec.model_validate(t.spec()) for t in self.tools)

    @cached_property
    def _response_format(self) -> ResponseFormat | None:
        if self.output_type is None:
            return None
        if isinstance(self.output_type, dict):
            name = str(self.output_type.get("title", f"{self.name}_output"))
            return ResponseFormat.from_json_schema(self.output_type, name=name)
        return ResponseFormat.from_model(self.output_type)

    def run_budget(self, request: RunBudget | None = None) -> RunBudget | None:
        """The agent's budget tightened by a request's (raises `BudgetAboveAgentLimitError` if it asks for more)."""
        merged = (self.budget or RunBudget()).tightened_by(request)
        return None if merged.unlimited else merged

    def loop_config(self, budget: RunBudget | None = None) -> LoopConfig:
        """The loop's rules for a run; `budget`: the run's (already tightened) budget, default the agent's."""
        return LoopConfig(
            max_iterations=self.max_iterations,
            max_consecutive_errors=self.max_consecutive_errors,
            terminate_on_unknown_calls=self.terminate_on_unknown_calls,
            tool_choice=self.tool_choice,
            on_approval_timeout=self.final_timeout_action,
            budget=budget if budget is not None else self.budget,
        )

    @property
    def final_timeout_action(self) -> Literal["reject", "fail"]:
        """What the last approval deadline does (after an escalation, its `then`)."""
        policy = self.on_approval_timeout
        return (
            "fail"
            if isinstance(policy, Escalate) and policy.then == "fail"
            else (policy if isinstance(policy, str) else "reject")
        )

    def chat_options(self, tool_choice: ToolChoice | None = None) -> ChatOptions:
        """Options for one model call; `tool_choice` is the loop's (it turns tools off near the end of a run)."""
        choice = self.tool_choice if tool_choice is None else tool_choice
        wire_choice = (
            NamedToolChoice(name=choice.required_function_name) if isinstance(choice, RequiredFunction) else choice
        )
        return ChatOptions(
            model=self.model,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            # OpenAI rejects tool_choice/parallel_tool_calls without tools
            tool_choice=wire_choice if self.tools else None,
            parallel_tool_calls=self.parallel_tool_calls if self.tools else None,
            response_format=self.response_format(),
        )

    def parse_output(self, text: str) -> Any:
        """The structured answer: an instance of `output_type`, or the decoded JSON for a schema; None without one."""
        if self.output_type is None:
            return None
        if isinstance(self.output_type, dict):
            return json_limits.loads(text)
        return self.output_type.model_validate_json(text)


class AgentRegistry(DefinitionRegistry[AgentDefinition]):
    """Agents by name. Build it once at start-up (`AgentRegistry.from_package("served_agents")`)."""

    kind = "agent"
    definition_type = AgentDefinition
    definition_error = AgentDefinitionError
    unknown_error = UnknownAgentError
    requires_definitions = True
    missing_package_hint = ": set AGENTS_PACKAGE to an importable package (default served_agents)"


__all__ = ["AgentDefinition", "AgentDefinitionError", "AgentRegistry", "UnknownAgentError"]
