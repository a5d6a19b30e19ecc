"""A read-only view of an incoming chat-completions request, for rules and brains to match on.

Clients differ in how they send content (a string, or a list of `{"type": "text", "text": ...}` parts), and tool
messages carry only a `tool_call_id`: this view normalises both, and names each tool result after the assistant tool
call it answers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ChatCompletionRequest(BaseModel):
    """The part of the OpenAI request body the server relies on; everything else is accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    messages: list[dict[str, Any]] = Field(min_length=1)
    stream: bool | None = False
    stream_options: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None

    @property
    def include_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))

    @property
    def json_schema(self) -> dict[str, Any] | None:
        """The schema of a `json_schema` response format, if one was requested."""
        fmt = self.response_format or {}
        if fmt.get("type") != "json_schema":
            return None
        schema = (fmt.get("json_schema") or {}).get("schema")
        return schema if isinstance(schema, dict) else {}


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    name: str
    content: str


def content_text(content: Any) -> str:
    """Text of a message `content`: a string, a list of parts, or None."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    return json.dumps(content)


@dataclass
class Conversation:
    request: ChatCompletionRequest
    messages: list[dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        self.messages = self.request.messages

    @property
    def model(self) -> str:
        return self.request.model

    @property
    def system_text(self) -> str:
        return "\n".join(
            content_text(m.get("content")) for m in self.messages if m.get("role") in ("system", "developer")
        )

    @property
    def last_user_text(self) -> str:
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return content_text(message.get("content"))
        return ""

    @property
    def offered_tools(self) -> list[str]:
        names = []
        for tool in self.request.tools or []:
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                names.append(function["name"])
        return names

    def _call_names(self) -> dict[str, str]:
        names: dict[str, str] = {}
        for message in self.messages:
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                if call.get("id"):
                    names[call["id"]] = function.get("name", "")
        return names

    @property
    def tool_calls(self) -> list[tuple[str, str, dict[str, Any]]]:
        """Every tool call the assistant made in the conversation, in order: (call id, name, parsed arguments)."""
        calls = []
        for message in self.messages:
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except ValueError:
                    arguments = {}
                calls.append(
                    (
                        str(call.get("id", "")),
                        function.get("name", ""),
                        arguments if isinstance(arguments, dict) else {},
                    )
                )
        return calls

    def call_arguments(self, call_id: str) -> dict[str, Any]:
        return next((args for cid, _, args in self.tool_calls if cid == call_id), {})

    @property
    def earlier_user_texts(self) -> list[str]:
        """The user's messages before the last one, newest first."""
        texts = [content_text(m.get("content")) for m in self.messages if m.get("role") == "user"]
        return texts[-2::-1]

    @property
    def trailing_tool_results(self) -> list[ToolResult]:
        """The tool results that end the conversation (empty unless the last message is a tool message)."""
        tail: list[dict[str, Any]] = []
        for message in reversed(self.messages):
            if message.get("role") != "tool":
                break
            tail.append(message)
        return self._results(reversed(tail))

    @property
    def tool_results(self) -> list[ToolResult]:
        """Every tool result in the conversation, in order."""
        return self._results(m for m in self.messages if m.get("role") == "tool")

    def _results(self, tool_messages: Iterable[dict[str, Any]]) -> list[ToolResult]:
        names = self._call_names()
        results = []
        for message in tool_messages:
            call_id = str(message.get("tool_call_id", ""))
            results.append(ToolResult(call_id, names.get(call_id, ""), content_text(message.get("content"))))
        return results

    @property
    def since_last_user(self) -> list[dict[str, Any]]:
        """The messages after the last user message (what the model has done in the current request)."""
        for index in range(len(self.messages) - 1, -1, -1):
            if self.messages[index].get("role") == "user":
                return self.messages[index + 1 :]
        return list(self.messages)
