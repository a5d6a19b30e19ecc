"""Mapping between records and Cosmos items (pure).

An item is the record's JSON fields as they are (``session_id``, ``seq``, ``run_id``, ``status``...), plus:
``id`` (the record's own key), ``sessionId`` (the partition key), ``type`` (the record kind), ``createdEpoch``
(creation time in epoch seconds: ISO strings with and without fractions do not sort correctly) and ``ttl`` when a
retention is configured, or the record is an unwritten start's (kept a day: `rules.retention_seconds`). Cosmos adds
``_etag``, ``_ts``, ``_rid``, ``_self``, ``_attachments``; ``_etag`` becomes the record's ``etag``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from .records import ApprovalRecord, EffectRecord, MessageRecord, RunRecord, SessionRecord
from .rules import retention_seconds

R = TypeVar("R", bound=BaseModel)

KEY_FIELD: dict[type[BaseModel], str] = {
    SessionRecord: "session_id",
    MessageRecord: "message_id",
    RunRecord: "run_id",
    ApprovalRecord: "approval_id",
    EffectRecord: "key",
}
TYPE_NAME: dict[type[BaseModel], str] = {
    SessionRecord: "session",
    MessageRecord: "message",
    RunRecord: "run",
    ApprovalRecord: "approval",
    EffectRecord: "effect",
}
_ENVELOPE = ("id", "sessionId", "type", "createdEpoch", "ttl")


def to_item(record: BaseModel, ttl_seconds: int | None) -> dict[str, Any]:
    item = record.model_dump(mode="json", exclude={"etag"})
    item["id"] = getattr(record, KEY_FIELD[type(record)])
    item["sessionId"] = record.session_id  # type: ignore[attr-defined]
    item["type"] = TYPE_NAME[type(record)]
    created = getattr(record, "created_at", None)
    if created is not None:
        item["createdEpoch"] = created.timestamp()
    if isinstance(record, RunRecord):
        ttl_seconds = retention_seconds(record, ttl_seconds)  # an unwritten start's record expires after a day
    if ttl_seconds is not None:
        item["ttl"] = ttl_seconds
    return item


def from_item(model: type[R], item: dict[str, Any]) -> R:
    data = {k: v for k, v in item.items() if not k.startswith("_") and k not in _ENVELOPE}
    if "etag" in model.model_fields:
        data["etag"] = item.get("_etag")
    return model.model_validate(data)


def lookup_id(kind: str, key: str) -> str:
    """Id of the index item that maps a run or approval id to its session (point read, no cross-partition query)."""
    return f"{kind}:{key}"


def lookup_item(kind: str, key: str, session_id: str, ttl_seconds: int | None) -> dict[str, Any]:
    item: dict[str, Any] = {"id": lookup_id(kind, key), "sessionId": session_id, "type": f"{kind}-lookup"}
    if ttl_seconds is not None:
        item["ttl"] = ttl_seconds
    return item
