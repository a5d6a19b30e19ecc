"""Server-Sent Events on the wire (WHATWG HTML §9.2): `event:`, `id:` (when the stream has ids), one `data:` line of
compact JSON."""

from __future__ import annotations

import json
from typing import Any

PING = b": ping\n\n"
MEDIA_TYPE = "text/event-stream"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def event(name: str, data: Any, event_id: str | None = None) -> bytes:
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    id_line = f"id: {event_id}\n" if event_id is not None else ""
    return utf8(f"event: {name}\n{id_line}data: {body}\n\n")


def utf8(text: str) -> bytes:
    """`text` as UTF-8. A model may stream a lone UTF-16 surrogate (a JSON `\\ud800` escape with no pair), which is no
    text: it becomes U+FFFD, as UTF-8 JSON encoders write it, instead of failing the stream (a pair split across two
    deltas, which meet in the draft, becomes its character)."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace").encode()
