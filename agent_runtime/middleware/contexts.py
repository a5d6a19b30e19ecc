"""The payload each pipeline carries (seed 000's context tables): inputs are mutable before `call_next`, `result` is
set by the real operation and may be replaced afterwards, `metadata` is shared between layers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..messages import ChatResponse, Message

if TYPE_CHECKING:
    from ..models.types import ChatOptions, ToolSpec
    from ..tools import Tool, ToolContext


@dataclass
class AgentRunContext:
    """Around a whole run. `messages`: the new input messages; `result`: the run's outcome (set by the runner)."""

    agent_name: str
    messages: list[Message]
    run_id: str
    session_id: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    terminated: bool = False
    termination_message: str | None = None
    resumed: bool = False
    """True in a durable run's finish activity, where the chain runs again around the finished run: code before
    `call_next` already ran in the start activity (see `agent_runtime.middleware.run_phases`)."""


@dataclass
class ChatContext:
    """Around one model call. `messages` is the conversation as it will be sent (changing it does not change what is
    stored); `result` is the model's `ChatResponse` - what a layer leaves there is what gets stored."""

    messages: list[Message]
    options: ChatOptions
    tools: list[ToolSpec]
    agent_name: str | None = None
    run_id: str | None = None
    iteration: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    result: ChatResponse | None = None
    terminated: bool = False
    termination_message: str | None = None


@dataclass
class FunctionInvocationContext:
    """Around one tool call. `arguments` are the validated arguments (replace them to change what the tool gets);
    `result` is the tool's return value (or what a layer sets instead)."""

    tool: Tool
    arguments: BaseModel
    call_id: str
    tool_context: ToolContext
    metadata: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    terminated: bool = False
    termination_message: str | None = None
