"""Every request the scripted server received, for test assertions (bounded, thread-safe).

The log keeps request headers verbatim (tests assert e.g. that an Entra bearer token reached the server); it lives
only in memory and the server never writes it to a logger.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from pydantic import BaseModel, Field

from .script import Reply


class RecordedRequest(BaseModel):
    index: int
    method: str
    path: str
    query: dict[str, str] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)
    body: dict[str, Any] | None = None
    stream: bool = False
    status: int
    outcome: str
    """"reply", "fault", "invalid_request", "script_exhausted" or "responder_error"."""
    reply: Reply | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages") or [])

    @property
    def roles(self) -> list[str]:
        return [str(m.get("role")) for m in self.messages]

    @property
    def tool_names(self) -> list[str]:
        return [t.get("function", {}).get("name", "") for t in (self.body or {}).get("tools") or []]


class RequestLog:
    def __init__(self, max_entries: int = 1_000) -> None:
        self._entries: deque[RecordedRequest] = deque(maxlen=max_entries)
        self._count = 0
        self._changed = threading.Condition()

    def record(self, **fields: Any) -> RecordedRequest:
        with self._changed:
            entry = RecordedRequest(index=self._count, **fields)
            self._count += 1
            self._entries.append(entry)
            self._changed.notify_all()
            return entry

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._changed:
            return list(self._entries)

    @property
    def total(self) -> int:
        """Requests received since the last `clear()` (including ones rotated out of the bounded log)."""
        return self._count

    @property
    def last(self) -> RecordedRequest:
        with self._changed:
            if not self._entries:
                raise LookupError("the scripted model has received no request")
            return self._entries[-1]

    def __len__(self) -> int:
        with self._changed:
            return len(self._entries)

    def clear(self) -> None:
        with self._changed:
            self._entries.clear()
            self._count = 0

    def wait_for(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until at least `count` requests were received (bounded by `timeout`, then `TimeoutError`)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._count < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"expected {count} requests, got {self._count} within {timeout}s")
                self._changed.wait(remaining)
            return list(self._entries)
