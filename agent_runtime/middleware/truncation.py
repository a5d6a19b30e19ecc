"""Bound the conversation sent to the model to a message count and/or a token budget.

System messages are always kept; the oldest other messages are dropped first. A tool call and its results travel
together: a cut never leaves a tool result without the assistant message that asked for it (providers reject that).
Only what is *sent* shrinks; the stored history stays whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ..messages import Message
from .contexts import ChatContext
from .pipeline import CallNext


def estimate_tokens(message: Message) -> int:
    """A provider-neutral estimate (~4 characters per token, plus per-message overhead)."""
    return 4 + len(json.dumps([c.model_dump(mode="json") for c in message.contents])) // 4


def truncate_history(
    messages: list[Message],
    *,
    max_messages: int | None = None,
    max_tokens: int | None = None,
    count_tokens: Callable[[Message], int] = estimate_tokens,
) -> list[Message]:
    system = [m for m in messages if m.role == "system"]
    rest = [m for m in messages if m.role != "system"]
    budget = None if max_tokens is None else max_tokens - sum(count_tokens(m) for m in system)
    kept: list[Message] = []
    used = 0
    for message in reversed(rest):
        cost = count_tokens(message)
        if max_messages is not None and len(kept) >= max_messages:
            break
        if budget is not None and kept and used + cost > budget:
            break  # the newest message is always kept, even if it alone exceeds the budget
        kept.append(message)
        used += cost
    kept.reverse()
    while kept and kept[0].role == "tool":  # its function call was cut off
        kept.pop(0)
    return [*system, *kept]


class HistoryTruncationMiddleware:
    """Chat middleware applying `truncate_history` to `context.messages` before the call."""

    def __init__(
        self,
        *,
        max_messages: int | None = None,
        max_tokens: int | None = None,
        count_tokens: Callable[[Message], int] = estimate_tokens,
    ) -> None:
        if max_messages is None and max_tokens is None:
            raise ValueError("give max_messages, max_tokens or both")
        self.max_messages, self.max_tokens, self.count_tokens = max_messages, max_tokens, count_tokens

    async def process(self, context: ChatContext, call_next: CallNext) -> None:
        before = len(context.messages)
        context.messages = truncate_history(
            context.messages, max_messages=self.max_messages, max_tokens=self.max_tokens, count_tokens=self.count_tokens
        )
        context.metadata["truncated_messages"] = before - len(context.messages)
        await call_next()
