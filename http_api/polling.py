"""What every poll shares over HTTP: the poll query, long-polling, and the status code of a view (when a run's
view is worth answering: `run_lifecycle.wait_for_view`).

Long-polling reads only the orchestration state between views (one status call) and rebuilds a view from the
store only when that state changed: every change a client can see (progress, new updates or steps, approvals
asked, finished or crashed) changes the orchestration's runtime or custom status. Checks back off from 0.1 s to 1 s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import azure.functions as func
from pydantic import BaseModel, Field

from http_api.adapter import json_response
from http_api.models import MAX_WAIT_SECONDS

POLL_INTERVAL_SECONDS = 0.1
POLL_BACKOFF_FACTOR = 1.5
MAX_POLL_INTERVAL_SECONDS = 1.0
RETRY_AFTER_SECONDS = "1"
# A failed run is never a 200 (clients must not mistake it for a success): like Durable Functions' own
# wait-for-completion response, it answers 500 with the run (status "failed", `error` saying why) as the body.
FAILED_STATUS_CODE = 500

StateT = TypeVar("StateT")
ViewT = TypeVar("ViewT")


class PollQuery(BaseModel):
    continuation_token: str | None = None
    wait_seconds: float = Field(default=0, ge=0, le=MAX_WAIT_SECONDS)


async def long_poll(
    wait_seconds: float,
    read_state: Callable[[], Awaitable[StateT]],
    build_view: Callable[[StateT], Awaitable[ViewT]],
    answer_now: Callable[[ViewT], bool],
    on_timeout: Callable[[ViewT, StateT], Awaitable[ViewT]] | None = None,
) -> ViewT:
    """Build views until `answer_now` says one is worth answering, or `wait_seconds` pass (then `on_timeout` may
    refresh what the orchestration state does not track)."""
    deadline = time.monotonic() + wait_seconds
    state = await read_state()
    while True:
        view = await build_view(state)
        if answer_now(view):
            return view
        seen, interval = state, POLL_INTERVAL_SECONDS
        while state == seen:
            if time.monotonic() >= deadline:
                return await on_timeout(view, state) if on_timeout is not None else view
            await asyncio.sleep(min(interval, max(deadline - time.monotonic(), 0)))
            interval = min(interval * POLL_BACKOFF_FACTOR, MAX_POLL_INTERVAL_SECONDS)
            state = await read_state()


def view_response(view: Any, status: str, final_statuses: frozenset[str], self_link: str) -> func.HttpResponse:
    """202 (with `Retry-After` and `Location`) while running, 200 once completed or cancelled, 500 when failed."""
    if status == "failed":
        return json_response(view, status=FAILED_STATUS_CODE)
    if status in final_statuses:
        return json_response(view, status=200)
    return json_response(view, status=202, **{"Retry-After": RETRY_AFTER_SECONDS, "Location": self_link})
