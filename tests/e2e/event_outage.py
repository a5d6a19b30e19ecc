"""The store refusing to record a run's notification events (every write of one raises, as if it were unreachable)
while everything else goes through, wherever the app runs (`step_pause.failing`: files, read by every app process):
the recording activity then fails through all its retries."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

from step_pause import failing

EVENT_WRITES = {"kind": "notify_event"}  # `notifications.outbox.EVENT`


def events_refused(host: Any) -> AbstractContextManager[None]:
    """Until the block ends (`host`: the app's, with its `E2E_MARKER_DIR` setting)."""
    return failing(host, "record_effect", equal=EVENT_WRITES)


def wait_on_its_backoff(host: Any, run_id: str) -> None:
    """Advance `host`'s virtual clock until the run's failing recording waits on a timer of its backoff that fires
    more than a quarter of an hour later, not on its activity's retry timer (seconds): a cancel that arrives then
    wins that wait."""
    for _ in range(60):
        host.advance(600)
        events = [e for e in host.get_status(run_id, show_history=True)["historyEvents"]
                  if not e["EventType"].startswith("Orchestrator")]
        last = events[-1]
        if last["EventType"] == "TimerCreated" and (
                datetime.fromisoformat(last["FireAt"]) - datetime.fromisoformat(last["Timestamp"])
                > timedelta(minutes=15)):
            return
    raise AssertionError(f"the recording of run {run_id} never waited on a long timer")
