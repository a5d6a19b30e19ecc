"""Guardrails: block or redact text matching patterns, on the way in (user input) and/or out (model output).

Block on input short-circuits: the model is not called, the response is a refusal and `MiddlewareTermination` skips
every other layer (seed 000: a blocked request is not post-processed). Block on output replaces the model's answer
with the refusal. Redact replaces each match with a placeholder, in the text sent to the model (input) or in the
answer that gets stored (output).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from ..messages import ChatResponse, Message, TextContent
from .contexts import ChatContext
from .pipeline import CallNext, ChatMiddleware, MiddlewareTermination


def _latest_user_text(messages: list[Message]) -> str:
    return next((m.text for m in reversed(messages) if m.role == "user"), "")


class GuardrailMiddleware(ChatMiddleware):
    def __init__(
        self,
        patterns: Sequence[str | re.Pattern[str]],
        *,
        action: Literal["block", "redact"] = "block",
        apply_to: Sequence[Literal["input", "output"]] = ("input", "output"),
        replacement: str = "[REDACTED]",
        refusal: str = "I can't help with that request.",
    ) -> None:
        self.patterns = [re.compile(p) if isinstance(p, str) else p for p in patterns]
        self.action, self.apply_to, self.replacement, self.refusal = action, set(apply_to), replacement, refusal

    @property
    def holds_back_output(self) -> bool:
        """An output guardrail judges the whole answer: no token of it may reach a client before it has (a streamed
        draft would show what it then blocks or redacts)."""
        return "output" in self.apply_to

    def matches(self, text: str) -> bool:
        return any(p.search(text) for p in self.patterns)

    def redact(self, text: str) -> str:
        for pattern in self.patterns:
            text = pattern.sub(self.replacement, text)
        return text

    def _refusal(self, context: ChatContext, where: str) -> ChatResponse:
        context.metadata["guardrail"] = {"action": "blocked", "where": where}
        return ChatResponse(message=Message.assistant(self.refusal), finish_reason="content_filter")

    def _redacted(self, messages: list[Message]) -> list[Message]:
        return [
            m.model_copy(
                update={
                    "contents": [
                        TextContent(text=self.redact(c.text)) if isinstance(c, TextContent) else c for c in m.contents
                    ]
                }
            )
            for m in messages
        ]

    async def process(self, context: ChatContext, call_next: CallNext) -> None:
        if "input" in self.apply_to:
            if self.action == "redact":
                context.messages = [self._redacted([m])[0] if m.role == "user" else m for m in context.messages]
            elif self.matches(_latest_user_text(context.messages)):
                # Only the newest input is judged: a blocked message stays in the history and must not block
                # every later turn of the session.
                context.result = self._refusal(context, "input")
                raise MiddlewareTermination("blocked by guardrail")
        await call_next()
        if "output" in self.apply_to and context.result is not None and self.matches(context.result.text):
            if self.action == "block":
                context.result = self._refusal(context, "output")
            else:
                context.result = context.result.model_copy(update={"messages": self._redacted(context.result.messages)})
