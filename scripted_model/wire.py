"""Turning a `Reply` into OpenAI chat-completions JSON: one `chat.completion` object, or the sequence of
`chat.completion.chunk` objects of an SSE stream (the shape OpenAI streams: a role chunk, content/tool-call deltas,
a finish chunk, then a usage-only chunk when `stream_options.include_usage` is set)."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any

from .conversation import ChatCompletionRequest, content_text

_ids = itertools.count(1)
_STREAM_PIECE_CHARS = 16


def next_id(prefix: str) -> str:
    """Unique per process, never reused while the server runs; shaped like OpenAI's ("chatcmpl-...", "call_...")."""
    separator = "_" if prefix == "call" else "-"
    return f"{prefix}{separator}scripted{next(_ids):08d}"


@dataclass(frozen=True)
class Answer:
    """A fully resolved answer (text and tool calls with ids) ready to be serialised."""

    text: str | None
    tool_calls: list[tuple[str, str, str]]  # (id, name, arguments JSON)
    finish_reason: str
    usage: dict[str, int] | None  # None: not reported (as some OpenAI-compatible servers do)


def estimate_tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4) if text else 0


def estimate_usage(request: ChatCompletionRequest, text: str | None, tool_calls: list[tuple[str, str, str]]) -> dict:
    prompt = sum(estimate_tokens(content_text(m.get("content"))) + 4 for m in request.messages)
    completion = estimate_tokens(text or "") + sum(estimate_tokens(name + args) for _, name, args in tool_calls)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def scripted_usage(estimate: dict, scripted: dict[str, int] | None) -> dict:
    """The estimate with the script's counts in their place (the total follows them unless the script sets it)."""
    usage = {**estimate, **(scripted or {})}
    if scripted and "total_tokens" not in scripted:
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return usage


def completion_body(answer: Answer, *, completion_id: str, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text, "refusal": None}
    if answer.tool_calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            for call_id, name, arguments in answer.tool_calls
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": answer.finish_reason, "logprobs": None}],
        "usage": answer.usage,
        "system_fingerprint": "scripted",
    }


def _pieces(text: str) -> list[str]:
    return [text[i : i + _STREAM_PIECE_CHARS] for i in range(0, len(text), _STREAM_PIECE_CHARS)]


def stream_chunks(answer: Answer, *, completion_id: str, model: str, include_usage: bool) -> list[dict[str, Any]]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": "scripted",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
        }

    chunks = [chunk({"role": "assistant", "content": "" if answer.text is not None else None})]
    chunks += [chunk({"content": piece}) for piece in _pieces(answer.text or "")]
    for index, (call_id, name, arguments) in enumerate(answer.tool_calls):
        head = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        chunks.append(chunk({"tool_calls": [head]}))
        chunks += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}) for piece in _pieces(arguments)
        ]
    chunks.append(chunk({}, answer.finish_reason))
    include_usage = include_usage and answer.usage is not None
    if include_usage:
        usage_chunk = chunk({})
        usage_chunk["choices"] = []
        usage_chunk["usage"] = answer.usage
        chunks.append(usage_chunk)
    for c in chunks[:-1] if include_usage else chunks:
        c["usage"] = None
    return chunks


def error_body(message: str, *, type_: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}
