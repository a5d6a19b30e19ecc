"""Messages and their contents: the vocabulary every other part of the runtime speaks.

Everything here is a pydantic v2 model with a stable JSON form (`model_dump(mode="json")`): contents are a union
discriminated by `type`, so a stored message round-trips through Cosmos/SQLite/Durable payloads unchanged.

Approvals follow seed 002's chosen option 5: base `UserInputRequestContent` / `UserInputResponseContent` (an `id`
pairs a request with its response) and the function-approval subtypes that carry the function call itself, so a
decision can be understood (and audited) without looking anything else up.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from . import json_limits

Role = Literal["system", "user", "assistant", "tool"]

ModelT = TypeVar("ModelT", bound=BaseModel)
# `json.dumps` with arguments builds an encoder per call; one, stateless, serves every call.
_ARGUMENTS_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Usage(_Model):
    """Token counts of one model call (or a sum of several: `a + b`). `cost`: what the calls cost at the configured
    model prices (`agent_runtime.spend.ModelPrices`), None when no call was priced. `estimated`: True when some of
    the tokens are an estimate, because the provider reported no usage for a call (`agent_runtime.spend`)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None
    estimated: bool | None = None  # None, not False: a reported count's JSON stays as it always was

    def __add__(self, other: Usage | None) -> Usage:
        if other is None:
            return self
        cost = None if self.cost is None and other.cost is None else (self.cost or 0.0) + (other.cost or 0.0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cost=cost,
            estimated=True if self.estimated or other.estimated else None,
        )


# --------------------------------------------------------------------------------------------------- contents


class TextContent(_Model):
    type: Literal["text"] = "text"
    text: str


class DataContent(_Model):
    """Binary data (an image, audio, a blob) inline as a `data:` URI, e.g. from an MCP tool result."""

    type: Literal["data"] = "data"
    uri: str = Field(pattern=r"^data:")
    media_type: str

    @property
    def size(self) -> int:
        """How many bytes the base64 data holds."""
        data = self.uri.partition(",")[2]
        return len(data) * 3 // 4 - len(data) + len(data.rstrip("="))


class UriContent(_Model):
    """A reference to content elsewhere (a resource link): the URI, and its media type when known."""

    type: Literal["uri"] = "uri"
    uri: str
    media_type: str | None = None
    name: str | None = None


class FunctionCallContent(_Model):
    """A tool call proposed by the model. `arguments` is the parsed object, or the raw JSON text as the model sent it
    (kept verbatim so malformed arguments can be reported back to the model instead of being lost)."""

    type: Literal["function_call"] = "function_call"
    call_id: str
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)

    def parse_arguments(self) -> dict[str, Any]:
        """The arguments as a dict. Raises `ValueError` with a model-readable reason if they are not a JSON object."""
        if isinstance(self.arguments, dict):
            return self.arguments
        text = self.arguments.strip()
        if not text:
            return {}
        try:
            parsed = json_limits.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments are not valid JSON: {exc.msg} at position {exc.pos}") from exc
        except json_limits.JsonLimitError as exc:
            raise ValueError(f"arguments cannot be used: {exc}") from exc
        if not isinstance(parsed, dict):
            raise ValueError(f"arguments must be a JSON object, got {type(parsed).__name__}")
        return parsed

    def arguments_json(self) -> str:
        """The arguments as JSON text (what OpenAI-style wire formats carry)."""
        if isinstance(self.arguments, str):
            return self.arguments
        return _ARGUMENTS_JSON.encode(self.arguments)


class FunctionResultContent(_Model):
    """The outcome of one tool call: `result` on success, `error` (a message for the model) on failure."""

    type: Literal["function_result"] = "function_result"
    call_id: str
    result: Any = None
    error: str | None = None

    @property
    def is_error(self) -> bool:
        return self.error is not None


class UserInputRequestContent(_Model):
    """Base of every "the agent needs the user before it can go on" content (seed 002, option 5)."""

    id: str


class UserInputResponseContent(_Model):
    """Base of every answer to a `UserInputRequestContent`; `id` is the request's id."""

    id: str


class FunctionApprovalResponseContent(UserInputResponseContent):
    """A decision on a proposed call. Approving with edits = `approved=True` and a `function_call` whose arguments
    differ from the request's (the step re-validates them against the tool schema)."""

    type: Literal["function_approval_response"] = "function_approval_response"
    approved: bool
    function_call: FunctionCallContent
    reason: str | None = None


class FunctionApprovalRequestContent(UserInputRequestContent):
    """The agent asks whether it may run `function_call`."""

    type: Literal["function_approval_request"] = "function_approval_request"
    function_call: FunctionCallContent

    def create_approval(
        self, *, arguments: dict[str, Any] | None = None, reason: str | None = None
    ) -> FunctionApprovalResponseContent:
        call = (
            self.function_call if arguments is None else self.function_call.model_copy(update={"arguments": arguments})
        )
        return FunctionApprovalResponseContent(id=self.id, approved=True, function_call=call, reason=reason)

    def create_rejection(self, reason: str | None = None) -> FunctionApprovalResponseContent:
        return FunctionApprovalResponseContent(
            id=self.id, approved=False, function_call=self.function_call, reason=reason
        )


class UsageContent(_Model):
    """Usage reported inside a content stream (streaming responses report it as the last update)."""

    type: Literal["usage"] = "usage"
    usage: Usage


Content = Annotated[
    TextContent
    | DataContent
    | UriContent
    | FunctionCallContent
    | FunctionResultContent
    | FunctionApprovalRequestContent
    | FunctionApprovalResponseContent
    | UsageContent,
    Field(discriminator="type"),
]


def _wrap_text(data: Any) -> Any:
    """Let callers pass `contents="hi"` or a list mixing strings and contents. (Runs on every message parsed: a plain
    loop, no generator.)"""
    if isinstance(data, dict):
        contents = data.get("contents")
        if isinstance(contents, str):
            return {**data, "contents": [TextContent(text=contents)]}
        if isinstance(contents, list):
            for content in contents:
                if isinstance(content, str):
                    return {**data, "contents": [TextContent(text=c) if isinstance(c, str) else c for c in contents]}
    return data


def _text_of(contents: Iterable[Any]) -> str:
    return "".join(c.text for c in contents if isinstance(c, TextContent))


# --------------------------------------------------------------------------------------------------- messages


class Message(_Model):
    role: Role
    contents: list[Content] = Field(default_factory=list)
    message_id: str | None = None
    author_name: str | None = None
    created_at: datetime | None = None
    usage: Usage | None = Field(
        default=None, description="on a model's answer: the tokens (and cost) of the call that produced it"
    )

    _wrap = model_validator(mode="before")(_wrap_text)

    @property
    def text(self) -> str:
        return _text_of(self.contents)

    @property
    def function_calls(self) -> list[FunctionCallContent]:
        return [c for c in self.contents if isinstance(c, FunctionCallContent)]

    @property
    def function_results(self) -> list[FunctionResultContent]:
        return [c for c in self.contents if isinstance(c, FunctionResultContent)]

    @classmethod
    def system(cls, text: str, **fields: Any) -> Message:
        return cls(role="system", contents=[TextContent(text=text)], **fields)

    @classmethod
    def user(cls, text: str, **fields: Any) -> Message:
        return cls(role="user", contents=[TextContent(text=text)], **fields)

    @classmethod
    def assistant(cls, text: str, **fields: Any) -> Message:
        return cls(role="assistant", contents=[TextContent(text=text)], **fields)

    @classmethod
    def tool_result(cls, result: FunctionResultContent, **fields: Any) -> Message:
        return cls(role="tool", contents=[result], **fields)


class ChatResponse(_Model):
    """What a model client returns for one call. `ChatResponse(message=m)` is accepted for the one-message case."""

    messages: list[Message] = Field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None
    model_id: str | None = None
    response_id: str | None = None
    created_at: datetime | None = None

    @model_validator(mode="before")
    @classmethod
    def _single_message(cls, data: Any) -> Any:
        if isinstance(data, dict) and "message" in data:
            data = dict(data)
            message = data.pop("message")
            data["messages"] = [*data.get("messages", []), message]
        return data

    @property
    def text(self) -> str:
        return response_text(self.messages)

    @property
    def function_calls(self) -> list[FunctionCallContent]:
        return [call for m in self.messages for call in m.function_calls]

    def parse_value(self, model_type: type[ModelT]) -> ModelT:
        """Structured output: the response text validated as `model_type` (raises pydantic's ValidationError)."""
        return model_type.model_validate_json(self.text)

    @classmethod
    def from_updates(cls, updates: Iterable[ChatResponseUpdate]) -> ChatResponse:
        """Assemble streamed updates: consecutive updates with the same message id (or none) form one message, text
        deltas are concatenated, function-call argument fragments with the same call_id are joined."""
        response_id = model_id = finish_reason = None
        usage: Usage | None = None
        messages: list[Message] = []
        current: Message | None = None
        for update in updates:  # kept in locals: a model's attribute assignment costs more than a local's
            response_id = update.response_id or response_id
            model_id = update.model_id or model_id
            finish_reason = update.finish_reason or finish_reason
            if update.usage is not None:
                usage = update.usage + usage
            if current is None or (update.message_id and update.message_id != current.message_id):
                current = Message(role=update.role or "assistant", message_id=update.message_id)
                messages.append(current)
            for content in update.contents:
                if isinstance(content, UsageContent):
                    usage = content.usage + usage
                else:
                    _merge_content(current.contents, content)
        return cls(
            messages=[m for m in messages if m.contents],
            usage=usage,
            finish_reason=finish_reason,
            model_id=model_id,
            response_id=response_id,
        )


def _merge_content(contents: list[Any], content: Any) -> None:
    last = contents[-1] if contents else None
    if isinstance(content, TextContent) and isinstance(last, TextContent):
        contents[-1] = TextContent(text=last.text + content.text)
        return
    if isinstance(content, FunctionCallContent):
        for index, existing in enumerate(contents):
            if isinstance(existing, FunctionCallContent) and existing.call_id == content.call_id:
                merged = existing.arguments_json() + content.arguments_json()
                contents[index] = existing.model_copy(
                    update={"arguments": merged, "name": existing.name or content.name}
                )
                return
    contents.append(content)


class ChatResponseUpdate(_Model):
    """One streamed chunk of a `ChatResponse`."""

    role: Role | None = None
    contents: list[Content] = Field(default_factory=list)
    message_id: str | None = None
    response_id: str | None = None
    model_id: str | None = None
    finish_reason: str | None = None
    usage: Usage | None = None

    _wrap = model_validator(mode="before")(_wrap_text)

    @property
    def text(self) -> str:
        return _text_of(self.contents)


# --------------------------------------------------------------------------------------------------- helpers


def response_text(messages: Sequence[Message]) -> str:
    """The text a caller shows for a response: the text of its assistant messages, joined by blank lines."""
    return "\n\n".join(m.text for m in messages if m.role == "assistant" and m.text)


def last_assistant_text(messages: Sequence[Message]) -> str:
    """The text of the last assistant message that has text ("" if none) - the answer of a finished run."""
    for message in reversed(messages):
        if message.role == "assistant" and message.text:
            return message.text
    return ""


def pending_approval_requests(messages: Sequence[Message]) -> list[FunctionApprovalRequestContent]:
    """Approval requests in `messages` that no `FunctionApprovalResponseContent` has answered yet, in order."""
    answered = {c.id for m in messages for c in m.contents if isinstance(c, FunctionApprovalResponseContent)}
    return [
        c
        for m in messages
        for c in m.contents
        if isinstance(c, FunctionApprovalRequestContent) and c.id not in answered
    ]


def copy_json(value: Any) -> Any:
    """A copy of a JSON value (dicts, lists, scalars) no change to which reaches the original: a walk of plain JSON,
    several times faster than `copy.deepcopy` (its memo)."""
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    return value  # str, int, float, bool, None: immutable


def unanswered_function_calls(messages: Sequence[Message]) -> list[FunctionCallContent]:
    """Function calls with no function result yet (a conversation must not be sent to a model in that state)."""
    resolved = {r.call_id for m in messages for r in m.function_results}
    return [call for m in messages for call in m.function_calls if call.call_id not in resolved]


__all__ = [
    "ChatResponse",
    "ChatResponseUpdate",
    "Content",
    "DataContent",
    "FunctionApprovalRequestContent",
    "FunctionApprovalResponseContent",
    "FunctionCallContent",
    "FunctionResultContent",
    "Message",
    "Role",
    "TextContent",
    "UriContent",
    "Usage",
    "UsageContent",
    "UserInputRequestContent",
    "UserInputResponseContent",
    "copy_json",
    "last_assistant_text",
    "pending_approval_requests",
    "response_text",
    "unanswered_function_calls",
]
