"""Legacy out-of-proc entity protocol: ids, RequestMessage/ResponseMessage JSON, batch trigger JSON and result parsing.

See durable-protocol.md E.1-E.3. Pure functions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

_UNSET_TIME = "0001-01-01T00:00:00"
_BAD_KEY_CHARS = set("/\\?#")


def scheduler_id(name: str, key: str) -> str:
    """`@` + lower(name) + `@` + key."""
    return f"@{name.lower()}@{key}"


def parse_scheduler_id(instance_id: str) -> tuple[str, str]:
    """Name and key of `@name@key` (the key may itself contain `@`)."""
    if not instance_id.startswith("@"):
        raise ValueError(f"'{instance_id}' is not an entity id")
    pos = instance_id.find("@", 1)
    if pos < 0:
        raise ValueError(f"'{instance_id}' is not an entity id")
    return instance_id[1:pos], instance_id[pos + 1 :]


def key_problem(key: str) -> str | None:
    """Why a key is invalid (the extension's swapped-argument message), or None."""
    if any(c in _BAD_KEY_CHARS or ord(c) < 32 or 127 <= ord(c) < 160 for c in key):
        return "entityKey (Parameter 'Entity keys must not contain /, \\, ?, #, or control characters.')"
    return None


def request_message(
    *,
    operation: str,
    signal: bool,
    input_text: str | None,
    request_id: str,
    parent: str | None,
    parent_execution: str | None,
) -> str:
    """`RequestMessage` JSON: declaration order, defaults omitted (`DefaultValueHandling.Ignore`), reorder window 0."""
    body: dict[str, Any] = {"op": operation}
    if signal:
        body["signal"] = True
    if input_text is not None:
        body["input"] = input_text
    body["id"] = request_id
    if parent is not None:
        body["parent"] = parent
    if parent_execution is not None:
        body["parentExecution"] = parent_execution
    body["Timestamp"] = _UNSET_TIME
    body["Predecessor"] = _UNSET_TIME
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class EntityRequest:
    operation: str
    input: str | None
    request_id: str
    is_signal: bool
    parent: str | None
    parent_execution: str | None

    @classmethod
    def from_json(cls, text: str) -> EntityRequest:
        data = json.loads(text)
        return cls(
            operation=data.get("op") or "",
            input=data.get("input"),
            request_id=data.get("id") or "",
            is_signal=bool(data.get("signal", False)),
            parent=data.get("parent"),
            parent_execution=data.get("parentExecution"),
        )


def response_message(result: str | None, is_error: bool) -> str:
    body: dict[str, Any] = {"result": result}
    if is_error:
        body["exceptionType"] = "Error"
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def batch_request_json(name: str, key: str, exists: bool, state: str | None, batch: list[EntityRequest]) -> str:
    """The entity trigger value: `JObject.ToString()` (2-space indent) in the extension's property order."""
    body = {
        "self": {"name": name.lower(), "key": key},
        "exists": exists,
        "state": state,
        "batch": [{"name": r.operation, "input": r.input, "isSignal": r.is_signal} for r in batch],
    }
    return json.dumps(body, indent=2, ensure_ascii=False)


@dataclass(frozen=True)
class OperationResult:
    is_error: bool
    result: str | None


@dataclass(frozen=True)
class OutgoingSignal:
    target_name: str
    target_key: str
    operation: str
    input: str | None


@dataclass(frozen=True)
class BatchResult:
    exists: bool
    state: str | None
    results: list[OperationResult]
    signals: list[OutgoingSignal]


class EntityInternalError(Exception):
    """The batch result is unusable: the extension aborts the batch and redelivers it (E.6.5)."""


def parse_batch_result(text: Any, batch_size: int) -> BatchResult:
    """Parse what `Entity.handle` returned; raise EntityInternalError where the extension would abort the batch."""
    try:
        data = json.loads(text) if isinstance(text, str | bytes) else text
        results = [OperationResult(bool(r.get("isError")), r.get("result")) for r in data["results"]]
        signals = [
            OutgoingSignal(s["target"]["name"], s["target"]["key"], s.get("name") or "", s.get("input"))
            for s in data.get("signals") or []
        ]
        state = data.get("entityState")
        exists = bool(data.get("entityExists"))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise EntityInternalError("Out of proc orchestrators must return a valid JSON schema.") from exc
    if len(results) < batch_size:
        raise EntityInternalError(f"entity returned {len(results)} results for a batch of {batch_size}")
    return BatchResult(exists=exists, state=state, results=results[:batch_size], signals=signals)
