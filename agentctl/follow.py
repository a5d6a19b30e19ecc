"""Following a run: over the server-sent event stream when the app serves one, else by long-polling its view.

Both yield the same `RunEvent`s; both resume where they stopped (the stream's `Last-Event-ID`, the poll's
continuation token), so a dropped connection loses and repeats nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
from httpx_sse import connect_sse

from agentctl import retries
from agentctl.client import AgentsClient, ApiError, run_path
from agentctl.events import FINAL, Done, RunEvent, Status, TextDelta, events_of_update

POLL_WAIT_SECONDS = 2.0
MAX_RECONNECTS = 5


# The stream refused to this client, where polling serves as well (the app's detail says: poll the run instead).
TOO_MANY_STREAMS = frozenset({"too_many_stream_hosts", "too_many_stream_viewers"})


class StreamUnavailable(Exception):
    """The app serves no stream route (an older deployment), or no more streams of this run: poll instead."""


class _OpenAgain(Exception):
    """The stream's answer was a problem that passes (`retries`): open it again after `seconds`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


def follow(client: AgentsClient, view: dict[str, Any], *, workflow: bool = False) -> Iterator[RunEvent]:
    """Every event of the run (or workflow run) from `view` on, ending with `Done`."""
    try:
        yield from follow_stream(client, view["run_id"], workflow=workflow)
    except StreamUnavailable:
        yield from follow_polls(client, view, workflow=workflow)


def follow_stream(
    client: AgentsClient, run_id: str, after: str | None = None, *, workflow: bool = False
) -> Iterator[RunEvent]:
    last_id = after
    path = f"{run_path(run_id, workflow=workflow)}/stream"
    for attempt in range(1, MAX_RECONNECTS + 2):
        headers = {"Accept": "text/event-stream", **({"Last-Event-ID": last_id} if last_id else {})}
        try:
            with connect_sse(client.http, "GET", path, headers=headers, timeout=None) as source:
                _check_stream_answer(source.response, attempt)
                for sse in source.iter_sse():
                    if sse.id:
                        last_id = sse.id
                    data = json.loads(sse.data) if sse.data else {}
                    if sse.event == "update":
                        yield from events_of_update(data)
                    elif sse.event == "delta":
                        yield TextDelta(data.get("text", ""))
                    elif sse.event == "status":
                        yield Status(data.get("status", ""), data.get("pending_approvals") or [])
                    elif sse.event == "done":
                        yield Done(data)
                        return
        except (httpx.ReadError, httpx.RemoteProtocolError, httpx.ReadTimeout):
            continue  # reconnect and resume after the last event seen
        except _OpenAgain as again:
            client.sleep(again.seconds)
    raise ApiError(0, "stream_lost", f"the stream of run {run_id} kept dropping")


def _check_stream_answer(response: httpx.Response, attempt: int) -> None:
    if response.is_success:
        return
    response.read()
    body = response.json() if "json" in response.headers.get("content-type", "") else {}
    no_route = response.status_code == 405 or (
        response.status_code == 404 and body.get("code") in (None, "not_found", "route_not_found")
    )
    if no_route or body.get("code") in TOO_MANY_STREAMS:
        raise StreamUnavailable
    wait = retries.wait_before_retry(response.status_code, response.headers, attempt)
    if wait is not None:
        raise _OpenAgain(wait)
    AgentsClient._json(response)  # raises the problem as an ApiError


def follow_polls(client: AgentsClient, view: dict[str, Any], *, workflow: bool = False) -> Iterator[RunEvent]:
    """Long-poll the run's view: updates since the continuation token, the draft of the answer being written."""
    draft = ""
    status = None
    while True:
        for update in view.get("updates") or view.get("steps") or []:  # a workflow run's updates are its steps
            for event in events_of_update(update):
                yield event
                draft = ""  # a finished message replaces the draft that preceded it
        partial = view.get("partial_output") or ""
        if partial.startswith(draft) and len(partial) > len(draft):
            yield TextDelta(partial[len(draft):])
            draft = partial
        if view["status"] != status or view["status"] == "requires_action":
            status = view["status"]
            yield Status(status, view.get("pending_approvals") or [])
        if view["status"] in FINAL and not view.get("continuation_token"):
            yield Done(view)
            return
        wait = 0.3 if view["status"] == "in_progress" else POLL_WAIT_SECONDS
        view = client.poll(view["run_id"], view.get("continuation_token"), wait_seconds=wait, workflow=workflow)
