"""Compact JSON for what a run writes into its durable history: activity inputs and results, the orchestration's
input, custom status and output.

Durable keeps every one of these in the orchestration's history (and ships them to the worker on every episode), so
a field that says nothing new costs bytes on every step: `compact_json` leaves out each model field that holds its
default (None, False, 0, empty, or a default setting such as `tool_choice="auto"`). Tags (`kind`: one-value
literals) are always written, so unions still tell their members apart. The reader needs nothing new: validation
puts the default back, the full shape written by older code reads as before, and older code (a worker not yet
deployed) reads the compact shape as well, the defaults being the same.

The rule this sets: the default of a field that may be left out is part of the durable format - a different default
would read histories in flight differently (`tests/durable_format/wire_defaults.json` holds them). `compact_json`
never changes what the reader gets: for a type whose declaration shows it reads back unchanged
(`agent_runs.wire_shapes.reads_back_unchanged`: no union of models without a tag, no validators...) that holds by
construction; for any other type it validates its output and compares, and writes the full dump if they differ.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

from pydantic import BaseModel

from agent_runs.budget import checked_size, within_budget
from agent_runs.wire_shapes import reads_back_unchanged, tags_and_nested

# Payloads a `ReplayedPayloads` keeps: a few per step of each run in flight (the first build of each is what costs).
REPLAYED_PAYLOADS = 2048
# ... and the bytes of their JSON (key and payload), in all: ~1 KB an entry is usual (2 MB at the entry bound), but a
# payload may be as large as its budget (16 KB), whose 2048 entries would hold ~70 MB of JSON and more as objects.
REPLAYED_PAYLOAD_BYTES = 4 * 1024 * 1024


def compact_json(model: BaseModel, parse: Callable[[Any], Any] | None = None, *, read_as: Any = None) -> dict[str, Any]:
    """`model.model_dump(mode="json")` without the fields that hold their default, tags kept (see the module doc).
    `parse`: how the reader validates it (default: the model's own class), to check the round trip; `read_as`: the
    type `parse` validates into, if the declaration may spare the check (the model's class when `parse` is None)."""
    dumped = model.model_dump(mode="json", exclude_defaults=True)  # pydantic's own walk (fast), then the tags back
    _restore_tags(model, dumped)
    reader = type(model) if parse is None else read_as
    if reader is not None and reads_back_unchanged(reader):
        return dumped
    if (parse or type(model).model_validate)(dumped) == model:
        return dumped
    return model.model_dump(mode="json")


def _restore_tags(model: BaseModel, dumped: Any) -> None:
    if not isinstance(dumped, dict):
        return  # a custom serializer (or a root model) shaped it: leave it as it is
    tags, nested = tags_and_nested(type(model))
    for name in tags:
        dumped.setdefault(name, getattr(model, name))
    for name in nested:
        if name in dumped:
            _walk(getattr(model, name), dumped[name])


def _walk(value: Any, dumped: Any) -> None:
    if isinstance(value, BaseModel):
        _restore_tags(value, dumped)
    elif isinstance(value, list | tuple) and isinstance(dumped, list) and len(value) == len(dumped):
        for item, item_dumped in zip(value, dumped, strict=True):
            _walk(item, item_dumped)
    elif isinstance(value, dict) and isinstance(dumped, dict):
        for key, item in value.items():
            if isinstance(key, str) and key in dumped:
                _walk(item, dumped[key])


class ReplayedPayloads:
    """`compact_json` of the payloads an orchestrator builds again on every replay, checked against `budget` once.

    An episode that replays the whole history (one that cannot go on from a carried driver: `orchestrators.
    loop_replay`, e.g. after an approval) builds each earlier step's activity input and custom status again, to the
    same value. `compact_json` is a pure function of the model's class and content, and the
    model's full JSON form pins its content down, so the payload is kept under (class, full JSON): it cannot be stale
    (a changed value is another key) and nothing outside the value (clock, episode, instance) is involved. A payload
    over the budget is not kept: it raises again, the same way, on every replay. The payloads are shared between
    episodes: the Durable SDK only serializes them (`df_dumps`, `OrchestratorState.to_json`), and nothing may change
    them. Bounded in entries and in the bytes of their JSON, keys and payloads (the oldest go first): a payload may
    be as large as the budget, so a count alone would let one cache hold hundreds of MB (`bench memory` reads what
    they hold). Safe for episodes on several threads."""

    def __init__(self, what: str, budget: int, entries: int = REPLAYED_PAYLOADS,
                 max_bytes: int = REPLAYED_PAYLOAD_BYTES) -> None:
        self._what = what
        self._budget = budget
        self._entries = entries
        self._max_bytes = max_bytes
        self._payloads: dict[Hashable, tuple[dict[str, Any], int]] = {}  # key -> (payload, bytes charged)
        self._bytes = 0
        self._lock = threading.Lock()

    def payload(self, model: BaseModel, *, replayed: bool = True) -> dict[str, Any]:
        """`replayed`: whether an earlier episode built it too, most likely (the SDK's `is_replaying`); a payload
        built for the first time is not looked up nor kept (its key would cost as much). The value is the same."""
        if not replayed:
            return self.fresh(model)
        full = model.model_dump_json()
        return self._kept((type(model), full), len(full), lambda: model)

    def fresh(self, model: BaseModel) -> dict[str, Any]:
        """The payload, built (not looked up, not kept)."""
        return within_budget(compact_json(model), self._what, self._budget)

    def payload_for(self, key: bytes | str, build: Callable[[], BaseModel]) -> dict[str, Any]:
        """The payload of the model `build()` returns, kept under `key`: a value that determines that model (its
        caller vouches for this; `payload` uses the model's class and full JSON)."""
        return self._kept(key, len(key), build)

    def _kept(self, key: Hashable, key_bytes: int, build: Callable[[], BaseModel]) -> dict[str, Any]:
        found = self._payloads.get(key)
        if found is not None:
            return found[0]
        payload = compact_json(build())
        charged = key_bytes + checked_size(payload, self._what, self._budget)
        if charged > self._max_bytes:
            return payload  # larger than the whole bound: not kept (nor does it push the others out)
        with self._lock:
            self._forget(key)
            while self._payloads and (len(self._payloads) >= self._entries
                                      or self._bytes + charged > self._max_bytes):
                self._forget(next(iter(self._payloads)))
            self._payloads[key] = (payload, charged)
            self._bytes += charged
        return payload

    def held(self) -> tuple[int, int]:
        """(entries, bytes charged) held now."""
        with self._lock:
            return len(self._payloads), self._bytes

    def clear(self) -> None:
        """Forget every payload (each is built again when next asked for: a miss costs only time)."""
        with self._lock:
            self._payloads.clear()
            self._bytes = 0

    def _forget(self, key: Hashable) -> None:
        gone = self._payloads.pop(key, None)
        if gone is not None:
            self._bytes -= gone[1]
