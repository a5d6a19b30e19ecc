"""Server-Sent Events on the wire (WHATWG HTML §9.2): `event:`, `id:`, one `data:` line of compact JSON."""

from __future__ import annotations

import json
from typing import Any

PING = b": ping\n\n"
MEDIA_TYPE = "text/event-stream"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def event(name: str, data: Any, event_id: str) -> bytes:
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"event: {name}\nid: {event_id}\ndata: {body}\n\n".encode()
