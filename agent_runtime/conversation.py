"""Where the steps read and write a run's conversation, and how they name what they write.

`ConversationLog` is the seam to the session store: the store adapts to it (one log per session). Writes are
upserts by `message_id`, and every id a step writes is derived from the run id and the step/call it belongs to, so an
activity that Durable runs twice overwrites its own earlier write instead of duplicating it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .messages import Message


@runtime_checkable
class ConversationLog(Protocol):
    async def append(self, message: Message) -> None:
        """Store `message` (it has a `message_id`); a message with the same id is replaced in place."""
        ...

    async def messages(self) -> list[Message]:
        """The whole conversation in order of first append: copies the caller may change."""
        ...

    async def read(self) -> Sequence[Message]:
        """`messages()` without the copies: the messages may be shared with other readers, so the caller changes
        nothing in them, nor hands them to code that might. Read this way: a model call without chat middleware
        (model clients only read the request), a tool call (the tool gets a copy of its arguments), closing calls and
        a run result that no run middleware sees."""
        ...


class InMemoryConversationLog:
    """A `ConversationLog` in a list (tests, the in-process runner without a store)."""

    def __init__(self, messages: list[Message] | None = None) -> None:
        self._messages: list[Message] = []
        for message in messages or []:
            self._put(message.model_copy(deep=True))

    def _put(self, message: Message) -> None:
        if message.message_id is None:
            raise ValueError("messages in a conversation log need a message_id")
        for index, existing in enumerate(self._messages):
            if existing.message_id == message.message_id:
                self._messages[index] = message
                return
        self._messages.append(message)

    async def append(self, message: Message) -> None:
        self._put(message.model_copy(deep=True))

    async def messages(self) -> list[Message]:
        return [m.model_copy(deep=True) for m in self._messages]

    async def read(self) -> list[Message]:
        return list(self._messages)  # copies of what was appended: nobody else holds them


# Deterministic ids: `{run_id}:{kind}:{key}`. Kinds are stable strings; stores may index or parse them.
def input_message_id(run_id: str, index: int) -> str:
    return f"{run_id}:input:{index}"


def model_message_prefix(run_id: str, iteration: int) -> str:
    """Every message one model call stored starts with this (a response may hold several messages)."""
    return f"{run_id}:model:{iteration}:"


def model_message_id(run_id: str, iteration: int, index: int = 0) -> str:
    return f"{model_message_prefix(run_id, iteration)}{index}"


def result_message_id(run_id: str, call_id: str) -> str:
    return f"{run_id}:result:{call_id}"


def approval_request_message_id(run_id: str, call_id: str) -> str:
    return f"{run_id}:approval-request:{call_id}"


def approval_response_message_id(run_id: str, call_id: str) -> str:
    return f"{run_id}:approval-response:{call_id}"


def middleware_answer_message_id(run_id: str) -> str:
    """The answer of a run its run middleware ended before it started (short-circuit or termination)."""
    return f"{run_id}:middleware:answer"


def approval_id(run_id: str, call_id: str) -> str:
    """The id pairing a `FunctionApprovalRequestContent` with its response (what clients decide on)."""
    return f"{run_id}:{call_id}"


def idempotency_key(run_id: str, call_id: str) -> str:
    """Stable across every retry of one tool call; handed to the tool in `ToolContext`."""
    return f"{run_id}:{call_id}"


__all__ = [
    "ConversationLog",
    "InMemoryConversationLog",
    "approval_id",
    "approval_request_message_id",
    "approval_response_message_id",
    "idempotency_key",
    "input_message_id",
    "middleware_answer_message_id",
    "model_message_id",
    "model_message_prefix",
    "result_message_id",
]
