"""The store refusing to record a run's notification events (every write of one raises, as if it were unreachable)
while everything else goes through, wherever the app runs (`step_pause.failing`: files, read by every app process):
the recording activity then fails through all its retries."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from step_pause import failing

EVENT_WRITES = {"kind": "notify_event"}  # `notifications.outbox.EVENT`


def events_refused(host: Any) -> AbstractContextManager[None]:
    """Until the block ends (`host`: the app's, with its `E2E_MARKER_DIR` setting)."""
    return failing(host, "record_effect", equal=EVENT_WRITES)
