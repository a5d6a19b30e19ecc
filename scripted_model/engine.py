"""The sans-IO heart of the scripted server: given a parsed request, decide what to answer.

It owns the current responder (a `ScriptPlayer`, the demo brain, or any `Responder`), the queue of injected faults
and the default latency. All mutation goes through one lock, so tests may swap scripts from their own thread while
the server's event loop answers requests.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from .conversation import ChatCompletionRequest, Conversation
from .schema_sample import sample_for_schema
from .script import Fault, Reply, Script, ScriptPlayer
from .wire import Answer, estimate_usage, next_id, scripted_usage

FALLBACK_TEXT = "OK."


class Responder(Protocol):
    """Anything that can answer a conversation; None means "nothing left to say" (the server answers 500)."""

    def respond(self, conversation: Conversation) -> Reply | None: ...


class ScriptExhausted(Exception):
    pass


@dataclass(frozen=True)
class Decision:
    reply: Reply | None
    fault: Fault | None
    answer: Answer | None
    latency_s: float


class ScriptEngine:
    def __init__(self, responder: Responder | Script | None = None, *, latency_ms: float = 0.0) -> None:
        self._lock = threading.Lock()
        self._responder: Responder = _as_responder(responder)
        self._faults: deque[Fault] = deque()
        self.latency_ms = latency_ms

    def set_responder(self, responder: Responder | Script | None) -> None:
        """Replace what answers (a `Script` restarts from its first turn) and drop pending injected faults."""
        with self._lock:
            self._responder = _as_responder(responder)
            self._faults.clear()

    def fail_next(self, fault: Fault, times: int = 1) -> None:
        """Answer the next `times` requests with `fault`, before consulting the script."""
        with self._lock:
            self._faults.extend([fault] * times)

    @property
    def responder(self) -> Responder:
        return self._responder

    def decide(self, request: ChatCompletionRequest) -> Decision:
        """Raises `ScriptExhausted` when the responder has nothing left."""
        with self._lock:
            injected = self._faults.popleft() if self._faults else None
            reply = None if injected else self._responder.respond(Conversation(request))
        if injected is None and reply is None:
            raise ScriptExhausted(
                "the scripted model has no reply left for this request (no rule matched and no turn is left)"
            )
        latency_ms = reply.latency_ms if reply is not None and reply.latency_ms is not None else self.latency_ms
        fault = injected or (reply.fault if reply else None)
        answer = None if fault or reply is None else resolve_answer(reply, request)
        return Decision(reply=reply, fault=fault, answer=answer, latency_s=latency_ms / 1000.0)


def resolve_answer(reply: Reply, request: ChatCompletionRequest) -> Answer:
    text = reply.content_text
    tool_calls = [(call.id or next_id("call"), call.name, call.arguments_json()) for call in reply.tool_calls]
    if text is None and not tool_calls:
        schema = request.json_schema
        text = FALLBACK_TEXT if schema is None else _json_text(sample_for_schema(schema))
    usage = scripted_usage(estimate_usage(request, text, tool_calls), reply.usage)
    finish_reason = reply.finish_reason or ("tool_calls" if tool_calls else "stop")
    return Answer(text=text, tool_calls=tool_calls, finish_reason=finish_reason, usage=usage)


def _json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _as_responder(responder: Responder | Script | None) -> Responder:
    if responder is None:
        return ScriptPlayer(Script())
    if isinstance(responder, Script):
        return ScriptPlayer(responder)
    return responder
