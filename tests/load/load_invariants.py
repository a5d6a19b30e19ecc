"""What must hold for a session after any run, faults or not: no duplicated message, every call answered once."""

from __future__ import annotations

from collections import Counter
from typing import Any


def contents(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [c for m in messages for c in m.get("contents", []) if c.get("type") == kind]


def assert_conversation_sound(messages: list[dict[str, Any]]) -> None:
    """Unique ids and seqs in order; each tool call has exactly one result and each result a call."""
    ids = Counter(m["message_id"] for m in messages)
    assert not [i for i, n in ids.items() if n > 1], f"duplicated messages: {ids.most_common(3)}"
    seqs = [m["seq"] for m in messages]
    assert seqs == sorted(set(seqs)), "seqs must be unique and ascending"
    calls = Counter(c["call_id"] for c in contents(messages, "function_call"))
    results = Counter(c["call_id"] for c in contents(messages, "function_result"))
    assert set(calls) == set(results), f"calls without results or results without calls: {set(calls) ^ set(results)}"
    assert set(calls.values()) <= {1} and set(results.values()) <= {1}, "a call or a result appears twice"


def final_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [c["text"] for c in contents(messages, "text") if c.get("text")]
