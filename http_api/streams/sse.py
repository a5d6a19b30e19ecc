"""Server-Sent Events on the wire (WHATWG HTML §9.2): `event:`, `id:` (when the stream has ids), one `data:` line of
compact JSON."""

from __future__ import annotations

import json
from typing import Any

from agent_runtime.unicode_text import utf8  # a lone surrogate a model streamed goes out as U+FFFD

PING = b": ping\n\n"
MEDIA_TYPE = "text/event-stream"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def event(name: str, data: Any, event_id: str | None = None) -> bytes:
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    id_line = f"id: {event_id}\n" if event_id is not None else ""
    return utf8(f"event: {name}\n{id_line}data: {body}\n\n")
