"""Conversion between our messages/options and the OpenAI chat-completions wire format (pure functions, no I/O).

Outgoing: system/user/assistant text; assistant tool calls; each `FunctionResultContent` becomes its own `tool`
message (errors are sent as text the model can read); approval contents are bookkeeping for humans and are not sent.
Incoming: a `ChatCompletion` becomes a `ChatResponse`; stream chunks become `ChatResponseUpdate`s (tool-call
fragments are keyed by call id, so `assemble_response` joins them into whole calls).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from openai.types.chat import ChatCompletion
from openai.types.completion_usage import CompletionUsage
from pydantic import BaseModel

from .. import json_limits
from ..messages import (
    ChatResponse,
    ChatResponseUpdate,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    TextContent,
    Usage,
)
from ..unicode_text import well_formed
from .types import ChatOptions, ChatRequest, NamedToolChoice, ResponseFormat, ToolSpec

MaxTokensParameter = Literal["max_tokens", "max_completion_tokens"]
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_RESULT_JSON = json.JSONEncoder(ensure_ascii=False, default=str)  # json.dumps(...) without an encoder per call


# ------------------------------------------------------------------------------------------------ outgoing


def result_text(result: FunctionResultContent) -> str:
    """What the model reads for a tool result."""
    if result.error is not None:
        return f"Error: {result.error}"
    value = result.result
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if isinstance(value, list):
        value = [_without_inline_data(item) for item in value]
    return _RESULT_JSON.encode(value)


def _without_inline_data(item: Any) -> Any:
    """A tool message is text only: inline data (an image from an MCP tool) is described, not sent as base64."""
    if isinstance(item, dict) and item.get("type") == "data" and str(item.get("uri", "")).startswith("data:"):
        data = str(item["uri"]).partition(",")[2]
        size = len(data) * 3 // 4 - len(data) + len(data.rstrip("="))
        return {"type": "data", "media_type": item.get("media_type"), "bytes": size, "note": "binary data not shown"}
    return item


def to_openai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    for message in messages:
        texts: list[str] = []
        calls: list[FunctionCallContent] = []
        results: list[FunctionResultContent] = []
        for content in message.contents:  # one pass (`text`, `function_calls`, `function_results` make three)
            if isinstance(content, TextContent):
                texts.append(content.text)
            elif isinstance(content, FunctionCallContent):
                calls.append(content)
            elif isinstance(content, FunctionResultContent):
                results.append(content)
        text = "".join(texts)
        if message.role == "assistant" and (text or calls):
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = [
                    {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json()}}
                    for c in calls
                ]
            wire.append(_with_name(entry, message))
        elif message.role in ("system", "user") and text:
            wire.append(_with_name({"role": message.role, "content": text}, message))
        wire.extend({"role": "tool", "tool_call_id": r.call_id, "content": result_text(r)} for r in results)
    return wire


def _with_name(entry: dict[str, Any], message: Message) -> dict[str, Any]:
    # OpenAI rejects names outside [A-Za-z0-9_-]; an author name is a nicety, never worth a 400.
    if message.author_name and _NAME.match(message.author_name):
        entry["name"] = message.author_name
    return entry


def to_openai_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    out = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
        if tool.strict is not None:
            function["strict"] = tool.strict
        out.append({"type": "function", "function": function})
    return out


def to_openai_tool_choice(choice: str | NamedToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, NamedToolChoice):
        return {"type": "function", "function": {"name": choice.name}}
    return choice


def to_openai_response_format(fmt: ResponseFormat) -> dict[str, Any]:
    if fmt.type == "json_object":
        return {"type": "json_object"}
    return {
        "type": "json_schema",
        "json_schema": {"name": fmt.name, "schema": fmt.json_schema or {}, "strict": fmt.strict},
    }


def to_openai_arguments(
    request: ChatRequest, *, model: str, max_tokens_parameter: MaxTokensParameter = "max_tokens"
) -> dict[str, Any]:
    """Keyword arguments for `client.chat.completions.create(...)` (without `stream`)."""
    options: ChatOptions = request.options
    kwargs: dict[str, Any] = {"model": model, "messages": to_openai_messages(request.messages)}
    if request.tools:
        kwargs["tools"] = to_openai_tools(request.tools)
        # tool_choice / parallel_tool_calls without tools is a 400 on OpenAI: only send them with tools.
        if options.tool_choice is not None:
            kwargs["tool_choice"] = to_openai_tool_choice(options.tool_choice)
        if options.parallel_tool_calls is not None:
            kwargs["parallel_tool_calls"] = options.parallel_tool_calls
    if options.response_format is not None:
        kwargs["response_format"] = to_openai_response_format(options.response_format)
    if options.max_tokens is not None:
        kwargs[max_tokens_parameter] = options.max_tokens
    for field in ("temperature", "top_p", "stop", "seed", "user"):
        value = getattr(options, field)
        if value is not None:
            kwargs[field] = value
    if options.extra_body:
        kwargs["extra_body"] = options.extra_body
    return kwargs


# ------------------------------------------------------------------------------------------------ incoming


def parse_arguments(raw: str | None) -> dict[str, Any] | str:
    """A JSON object's dict, or the raw text when it is not one (the step reports that back to the model)."""
    if not raw:
        return {}
    try:
        parsed = json_limits.loads(raw)  # bounded: a model's output is text from outside
    except (json.JSONDecodeError, json_limits.JsonLimitError):
        return raw
    return parsed if isinstance(parsed, dict) else raw


def to_usage(usage: CompletionUsage | None) -> Usage | None:
    if usage is None:
        return None
    return _usage(usage.prompt_tokens, usage.completion_tokens, usage.total_tokens)


def _usage(prompt: int | None, completion: int | None, total: int | None) -> Usage:
    prompt, completion = prompt or 0, completion or 0
    return Usage(input_tokens=prompt, output_tokens=completion, total_tokens=total or prompt + completion)


def from_openai_completion(completion: ChatCompletion) -> ChatResponse:
    if not completion.choices:
        raise ValueError("the completion has no choices")
    choice = completion.choices[0]
    wire = choice.message
    contents: list[Any] = []
    text = wire.content if wire.content is not None else wire.refusal
    if text:
        contents.append(TextContent(text=well_formed(text)))
    for call in wire.tool_calls or []:
        function = getattr(call, "function", None)
        if function is None:  # custom (non-function) tools are not used by this runtime
            continue
        contents.append(
            FunctionCallContent(
                call_id=call.id,
                name=well_formed(function.name),
                arguments=parse_arguments(well_formed(function.arguments) if function.arguments else None),
            )
        )
    return ChatResponse(
        messages=[Message(role="assistant", contents=contents)],
        usage=to_usage(completion.usage),
        finish_reason=choice.finish_reason,
        model_id=completion.model,
        response_id=completion.id,
        created_at=datetime.fromtimestamp(completion.created, UTC) if completion.created else None,
    )


class StreamTranslator:
    """Stream events of one stream -> updates. Remembers each tool call's id and name by index, since OpenAI sends
    them only in a call's first fragment.

    An event is read from its JSON object as the server sent it, not through the SDK's `ChatCompletionChunk`: the
    few fields an update takes are read leniently (as the SDK's `construct` would take an OpenAI-compatible server's
    odd chunk: an unknown `finish_reason`, a missing `created`), and a typed chunk per event (validated, then read
    once) was about half of each event's cost. A shape no chunk can have is a `ValueError`."""

    def __init__(self) -> None:
        self._calls: dict[int, tuple[str, str]] = {}

    def translate(self, event: object) -> ChatResponseUpdate | None:
        if not isinstance(event, dict):
            raise ValueError(f"a stream event that is not a JSON object: {type(event).__name__}")
        try:
            return self._translate(event)
        except (AttributeError, TypeError, KeyError) as exc:  # e.g. a choice that is not an object
            raise ValueError(f"a malformed stream event: {exc}") from exc

    def _translate(self, event: dict[str, Any]) -> ChatResponseUpdate | None:
        contents: list[Any] = []
        role = None
        finish_reason = None
        for choice in (event.get("choices") or ())[:1]:
            delta = choice.get("delta") or {}
            role = delta.get("role")
            role = role if role in ("assistant", "tool", "user", "system") else None
            if text := delta.get("content"):
                contents.append({"type": "text", "text": text})
            if refusal := delta.get("refusal"):
                contents.append({"type": "text", "text": refusal})
            for call in delta.get("tool_calls") or ():
                index = call["index"]
                function = call.get("function") or {}
                call_id, name = self._calls.get(index, ("", ""))
                call_id = call.get("id") or call_id or f"call_{index}"
                name = function.get("name") or name
                self._calls[index] = (call_id, name)
                fragment = function.get("arguments") or ""
                contents.append({"type": "function_call", "call_id": call_id, "name": name, "arguments": fragment})
            finish_reason = choice.get("finish_reason")
        usage = _usage_of(event.get("usage"))
        if not contents and role is None and finish_reason is None and usage is None:
            return None
        # One validation of plain data: cheaper than building each content model and then the update around them.
        return ChatResponseUpdate.model_validate(
            {
                "role": role,
                "contents": contents,
                "response_id": event.get("id"),
                "model_id": event.get("model"),
                "finish_reason": finish_reason,
                "usage": usage,
            }
        )


def _usage_of(usage: dict[str, Any] | None) -> Usage | None:
    """`to_usage` of a stream event's `usage` object."""
    if usage is None:
        return None
    return _usage(usage.get("prompt_tokens"), usage.get("completion_tokens"), usage.get("total_tokens"))


def assemble_response(updates: Iterable[ChatResponseUpdate]) -> ChatResponse:
    """The `ChatResponse` a stream amounts to, with tool-call arguments parsed like a non-streamed response's, and its
    text well-formed (a lone surrogate the model streamed could not be stored: `unicode_text`)."""
    response = ChatResponse.from_updates(updates)
    for message in response.messages:
        message.contents = [_received(c) for c in message.contents]
    return response


def _received(content: Any) -> Any:
    if isinstance(content, TextContent):
        text = well_formed(content.text)
        return content if text is content.text else content.model_copy(update={"text": text})
    if isinstance(content, FunctionCallContent) and isinstance(content.arguments, str):
        arguments = parse_arguments(well_formed(content.arguments))
        return content.model_copy(update={"name": well_formed(content.name), "arguments": arguments})
    return content
