"""What following a run shows, whatever the transport (the SSE stream or long-polling): text as it is written, tool
calls and results, approvals needed, status changes, and the end."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FINAL = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class Answer:
    """A finished assistant text (what was streamed before it is already shown)."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    call_id: str
    name: str
    arguments: Any


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    result: Any
    error: str | None


@dataclass(frozen=True)
class Decision:
    approval_id: str
    approved: bool
    decided_by: str | None
    reason: str | None


@dataclass(frozen=True)
class StepEnded:
    """A workflow run's step that ended (an entry of its `steps`)."""

    step: str
    kind: str
    status: str
    error: str | None


@dataclass(frozen=True)
class Status:
    status: str
    pending_approvals: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Done:
    view: dict[str, Any]


RunEvent = TextDelta | Answer | ToolCall | ToolResult | Decision | StepEnded | Status | Done


def events_of_update(update: dict[str, Any]) -> list[RunEvent]:
    """The events one stored message stands for (a poll's or the stream's `update`; a workflow run's is a step)."""
    if "step" in update and "message" not in update:
        return [StepEnded(str(update["step"]), str(update.get("kind", "")), str(update.get("status", "")),
                          update.get("error"))]
    message = update.get("message") or {}
    found: list[RunEvent] = []
    for content in message.get("contents") or []:
        kind = content.get("type")
        if kind == "text" and message.get("role") == "assistant" and content.get("text"):
            found.append(Answer(content["text"]))
        elif kind == "function_call":
            found.append(ToolCall(content.get("call_id", ""), content.get("name", "?"), content.get("arguments")))
        elif kind == "function_result":
            found.append(ToolResult(content.get("call_id", ""), content.get("result"), content.get("error")))
        elif kind == "function_approval_response":
            found.append(
                Decision(content.get("id", ""), bool(content.get("approved")), message.get("author_name"),
                         content.get("reason"))
            )
    return found
