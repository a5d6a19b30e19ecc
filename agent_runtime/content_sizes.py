"""How much of a tool's result or a model's answer one stored message can hold.

The session stores each message as one item, and an item holds at most 2 MB (Cosmos DB's limit; the SQLite store
enforces the same, `session_store.limits`). A step whose message does not fit cannot store it: the step failed, and
Durable retried it, running the tool or asking the model again on every retry, each time for nothing (and billed).
So what a step stores is measured first, against `MAX_CONTENT_BYTES`, half an item (the rest for the message around
it): a tool's result or error is cut to it with a note the model reads (`fit_result`, `cut_text`); a model's answer
past it fails the call (`agent_runtime.steps`: cutting would change what the model said).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .messages import DataContent, FunctionCallContent, TextContent, UriContent

MAX_CONTENT_BYTES = 1024 * 1024
"""A tool result's (or error's) size, and a model answer's, as UTF-8 JSON: half a stored message."""
NOTE_ROOM = 200
"""Bytes kept for a note saying what was left out (`cut_text`'s, or a caller's own)."""
_FRAMING_BYTES = 64
"""A content's JSON around what `streamed_chars` counts (`{"type":"function_call","call_id":..,"name":..}`)."""


def json_bytes(value: Any) -> int:
    """The size of `value` as compact UTF-8 JSON."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def cut_text(text: str, limit: int = MAX_CONTENT_BYTES) -> str:
    """`text`, or as much of its start as fits in `limit` bytes of JSON with a note saying what was left out."""
    if json_bytes(text) <= limit:
        return text
    room = max(limit - NOTE_ROOM, 0)
    kept = text[:room]
    while kept and (size := json_bytes(kept)) > room:  # escapes and multi-byte characters: shrink in proportion
        kept = kept[: len(kept) * room // size]
    return f"{kept}\n[... {len(text) - len(kept)} more characters omitted: a tool result is kept to {limit} bytes]"


def fit_result(value: Any) -> Any:
    """A tool's result (JSON-able) as stored: itself when it fits in `MAX_CONTENT_BYTES`, else cut text (a text
    result) or its JSON text cut (data cannot be cut as data)."""
    if isinstance(value, str):
        return cut_text(value)
    if json_bytes(value) > MAX_CONTENT_BYTES:
        return cut_text(json.dumps(value, ensure_ascii=False))
    return value


def streamed_chars(contents: Iterable[Any]) -> int:
    """Characters of text, tool calls (name, id, arguments) and data URIs in `contents` (a streamed chunk's, or an
    answer's): cheap (it runs on every chunk), and never more than their bytes as stored, so a stream past
    `MAX_CONTENT_BYTES` of them can be given up before it ends."""
    count = 0
    for content in contents:
        if isinstance(content, TextContent):
            count += len(content.text)
        elif isinstance(content, FunctionCallContent):
            arguments = content.arguments
            count += len(content.name) + len(content.call_id)
            count += len(arguments) if isinstance(arguments, str) else len(str(arguments))
        elif isinstance(content, DataContent | UriContent):
            count += len(content.uri)
    return count


def oversized_answer(messages: Iterable[Any]) -> int | None:
    """The size of a model's answer (its messages' contents, as UTF-8 JSON) when it is over `MAX_CONTENT_BYTES`, else
    None. Serialized only when it may be over: a character is at most 6 bytes of JSON (`\\u0001`), and each content's
    own keys at most `_FRAMING_BYTES` (thousands of small tool calls add up too)."""
    contents = [content for message in messages for content in message.contents]
    if streamed_chars(contents) * 6 + _FRAMING_BYTES * len(contents) <= MAX_CONTENT_BYTES:
        return None
    size = json_bytes([content.model_dump(mode="json", exclude_none=True) for content in contents])
    return size if size > MAX_CONTENT_BYTES else None


__all__ = [
    "MAX_CONTENT_BYTES",
    "NOTE_ROOM",
    "cut_text",
    "fit_result",
    "json_bytes",
    "oversized_answer",
    "streamed_chars",
]
