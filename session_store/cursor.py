"""Opaque continuation tokens: a small JSON cursor, base64url-encoded and tagged with the query it belongs to.

Messages are paged by keyset (``seq`` greater than the last one returned), which is stable while new messages are
appended, needs no server-side cursor and behaves identically on every store.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from .errors import InvalidContinuationError


def encode(scope: str, position: dict[str, Any]) -> str:
    raw = json.dumps({"s": scope, "p": position}, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(scope: str, token: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        body = json.loads(raw)
    except (ValueError, TypeError) as exc:
        raise InvalidContinuationError("continuation token is malformed") from exc
    if not isinstance(body, dict) or body.get("s") != scope or not isinstance(body.get("p"), dict):
        raise InvalidContinuationError("continuation token belongs to another query")
    return body["p"]


def message_scope(session_id: str, after_seq: int | None, up_to_seq: int | None, run_id: str | None) -> str:
    """Binds a message token to its query so it cannot be replayed against another session or filter."""
    return json.dumps(["messages", session_id, after_seq, up_to_seq, run_id], separators=(",", ":"))
