"""What the scripted model answers: replies, faults, matching rules and the script that orders them.

Everything is a pydantic model so a script can live in a JSON file (`Script.from_file`) as well as in a test. A script
answers a request with, in order of precedence:
1. the first `Rule` whose `Match` fits the conversation (and that has uses left),
2. otherwise the next of the ordered `turns`,
3. otherwise `default` (if set); when nothing is left the server answers 500 `script_exhausted` so a test sees at
   once that the model was called more often than it scripted.

A script file (`python -m scripted_model --script weather.json`):

    {"rules": [{"match": {"last_user": "weather", "after_tool_results": false},
                "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}},
               {"match": {"last_tool_name": "get_weather"}, "reply": {"text": "Sunny in Paris."}}],
     "turns": [{"fault": {"status": 429, "retry_after": 1}}, {"text": "Hello!"}],
     "default": {"text": "I only know about the weather."}}
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .conversation import Conversation


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScriptedToolCall(_Model):
    """A tool call the model makes. `arguments` as a string is sent verbatim (so malformed JSON can be scripted)."""

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


class Fault(_Model):
    """A failure instead of an answer.

    - `http_error`: status `status` with an OpenAI-style error body; 429/503 carry `Retry-After` when `retry_after` is
      set (seconds; sent as `retry-after` and `retry-after-ms`).
    - `malformed`: a 200 whose body (or, when streaming, a chunk) is not valid JSON.
    - `disconnect`: the connection is dropped (when streaming: after the first chunk).
    - `billed`: an answer is made and its usage reported (`usage`, else estimated), then the call fails anyway: not
      streaming, a 200 whose completion has the usage but no choices; streaming, the whole answer (with its usage
      chunk when asked for) followed by an error event.
    """

    kind: Literal["http_error", "malformed", "disconnect", "billed"] = "http_error"
    status: int = 500
    retry_after: float | None = None
    message: str | None = None
    code: str | None = None
    echo_header: str | None = None
    """Add this request header's value to the error message (as some proxies do with `Authorization`)."""
    usage: dict[str, int] | None = None
    """`billed`: the usage reported before the failure."""

    @classmethod
    def rate_limited(cls, retry_after: float | None = 1.0) -> Fault:
        return cls(status=429, retry_after=retry_after, code="rate_limit_exceeded")

    @classmethod
    def server_error(cls, status: int = 500) -> Fault:
        return cls(status=status, code="server_error")

    @classmethod
    def bad_request(cls, message: str = "scripted bad request") -> Fault:
        return cls(status=400, message=message, code="invalid_request_error")

    @classmethod
    def malformed(cls) -> Fault:
        return cls(kind="malformed", status=200)

    @classmethod
    def disconnect(cls) -> Fault:
        return cls(kind="disconnect", status=0)

    @classmethod
    def billed(cls, usage: dict[str, int] | None = None) -> Fault:
        return cls(kind="billed", status=200, usage=usage, code="server_error")


class Reply(_Model):
    """One model answer: text and/or tool calls (several = parallel tool calls), or a fault.

    `json_output` is shorthand for structured output (sent as the JSON text of the message). With neither text, tool
    calls, JSON nor fault, the server synthesises an answer: a sample object when the request asked for a
    `json_schema` response format, else a short text.
    """

    text: str | None = None
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    json_output: Any = None
    fault: Fault | None = None
    finish_reason: Literal["stop", "length", "tool_calls", "content_filter"] | None = None
    latency_ms: float | None = Field(default=None, ge=0)
    usage: dict[str, int] | None = None

    @classmethod
    def say(cls, text: str) -> Reply:
        return cls(text=text)

    @classmethod
    def call(cls, name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None) -> Reply:
        return cls(tool_calls=[ScriptedToolCall(name=name, arguments=arguments or {}, id=id)])

    @classmethod
    def fail(cls, fault: Fault) -> Reply:
        return cls(fault=fault)

    @property
    def content_text(self) -> str | None:
        if self.json_output is not None:
            return json.dumps(self.json_output, ensure_ascii=False)
        return self.text


class Match(_Model):
    """Conditions on the incoming conversation; every condition that is set must hold (regexes use `re.search`,
    case-insensitive)."""

    last_user: str | None = None
    """Regex on the text of the last user message."""
    last_tool_result: str | None = None
    """Regex on the content of the most recent tool message (only if the conversation ends with tool results)."""
    last_tool_name: str | None = None
    """The conversation ends with tool results and one of them is from this tool."""
    system: str | None = None
    """Regex on the system/developer instructions."""
    tool_offered: str | None = None
    """The request offers a tool with this name."""
    model: str | None = None
    """Regex on the requested model/deployment name."""
    after_tool_results: bool | None = None
    """True: the conversation ends with tool results; False: it does not."""

    def matches(self, conversation: Conversation) -> bool:
        tail = conversation.trailing_tool_results
        checks = (
            (self.last_user, lambda: _search(self.last_user, conversation.last_user_text)),
            (self.system, lambda: _search(self.system, conversation.system_text)),
            (self.model, lambda: _search(self.model, conversation.model)),
            (self.tool_offered, lambda: self.tool_offered in conversation.offered_tools),
            (self.after_tool_results, lambda: bool(tail) == self.after_tool_results),
            (self.last_tool_name, lambda: any(r.name == self.last_tool_name for r in tail)),
            (self.last_tool_result, lambda: bool(tail) and _search(self.last_tool_result, tail[-1].content)),
        )
        return all(check() for condition, check in checks if condition is not None)


def _search(pattern: str | None, text: str) -> bool:
    return pattern is not None and re.search(pattern, text, re.IGNORECASE | re.DOTALL) is not None


class Rule(_Model):
    """`reply` when `match` holds; `times` limits how often the rule fires (None = always)."""

    match: Match = Field(default_factory=Match)
    reply: Reply
    times: int | None = Field(default=None, ge=1)


class Script(_Model):
    """Ordered turns and/or matching rules (see the module docstring for precedence)."""

    turns: list[Reply] = Field(default_factory=list)
    rules: list[Rule] = Field(default_factory=list)
    default: Reply | None = None

    @model_validator(mode="after")
    def _compile_regexes(self) -> Script:
        # Fail when the script is loaded, not on the first request that reaches a bad pattern.
        for rule in self.rules:
            for pattern in (rule.match.last_user, rule.match.last_tool_result, rule.match.system, rule.match.model):
                if pattern is None:
                    continue
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"rule pattern {pattern!r} is not a valid regex: {exc}") from None
        return self

    @classmethod
    def of(cls, *turns: Reply | str) -> Script:
        """`Script.of("hello", Reply.call("f"), ...)`: ordered turns, strings meaning text replies."""
        return cls(turns=[Reply(text=t) if isinstance(t, str) else t for t in turns])

    @classmethod
    def from_file(cls, path: str | Path) -> Script:
        return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))


class ScriptPlayer:
    """The mutable playback state of a `Script` (turn cursor, rule use counts). Not thread-safe: the server calls it
    from its event loop only."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self._next_turn = 0
        self._rule_uses = [0] * len(script.rules)

    def respond(self, conversation: Conversation) -> Reply | None:
        for index, rule in enumerate(self.script.rules):
            if rule.times is not None and self._rule_uses[index] >= rule.times:
                continue
            if rule.match.matches(conversation):
                self._rule_uses[index] += 1
                return rule.reply
        if self._next_turn < len(self.script.turns):
            self._next_turn += 1
            return self.script.turns[self._next_turn - 1]
        return self.script.default
