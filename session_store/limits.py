"""The per-item size limit, identical for every store so that both behave the same.

Cosmos DB caps an item at 2 MB (2,097,152 bytes of UTF-8 JSON, system properties included). Both stores measure the
record's JSON and reserve an allowance for the envelope (ids, partition key, ttl, ``_etag``/``_ts``/``_rid``...) so
that whatever passes this check is accepted by a real account.
"""

from __future__ import annotations

from pydantic import BaseModel

from .errors import ItemTooLargeError

MAX_ITEM_BYTES = 2 * 1024 * 1024
ENVELOPE_ALLOWANCE_BYTES = 4 * 1024
MAX_RECORD_BYTES = MAX_ITEM_BYTES - ENVELOPE_ALLOWANCE_BYTES


def ensure_fits(kind: str, key: str, record: BaseModel) -> int:
    """Return the record's serialized size, or raise ``ItemTooLargeError`` if it cannot be stored."""
    size = len(record.model_dump_json().encode("utf-8"))
    if size > MAX_RECORD_BYTES:
        raise ItemTooLargeError(kind, key, size, MAX_RECORD_BYTES)
    return size
