"""What one of our runs holds in durable state, in bytes: its orchestration history (as the status API shows it
with `showHistory` and `showHistoryOutput`) and its custom status.

Every stored payload counts once, as the history holds it: an activity's or the orchestration's `Input` is the
string the host stores (its bytes, not escaped a second time), a `Result` the JSON the host stores. Activity results
count: they are durable state as much as the inputs (the first anchor runs left them out)."""

from __future__ import annotations

import json
from typing import Any

_PAYLOADS = ("Input", "Result")


def json_bytes(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


def event_bytes(event: dict[str, Any]) -> int:
    size = json_bytes({k: v for k, v in event.items() if k not in _PAYLOADS})
    for key in _PAYLOADS:
        value = event.get(key)
        if value is not None:  # `,"Key":` plus the payload as stored
            size += len(key) + 4 + (len(value.encode()) if isinstance(value, str) else json_bytes(value))
    return size


def durable_state_bytes(status: dict[str, Any]) -> int:
    """`status`: the instance's status JSON with `historyEvents` (inputs and outputs shown)."""
    events = status.get("historyEvents") or []
    history = 2 + sum(event_bytes(e) for e in events) + max(len(events) - 1, 0)  # `[`, `]` and the commas
    return history + json_bytes(status.get("customStatus"))
