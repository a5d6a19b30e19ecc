"""Streamed responses (`stream: true`; `GET /responses/{id}?stream=true&starting_after=N`): the events of
`events.ResponseEventStream` over the live streams' transport (`http_api.streams`).

One watcher per run, shared by every Responses stream of that run (all its turns), reads the run as GET does
(`snapshots.read_snapshot`) whenever its orchestration status changes, and follows the answer being written; each
client's `ResponsePosition` turns the watcher's look into the events that client has not had. Pings, the time limit
(`STREAM_MAX_SECONDS`) and a client leaving are the transport's, as for the run streams.

On the wire as OpenAI sends them: `event: <type>` and `data: <the event>` (no `id:`, no `[DONE]`); the last event is
response.completed, response.failed (also for a cancelled response, its status says so) or response.incomplete.
Resuming is `starting_after`: the events depend only on what the response contains (see `events`), so the events
after N are those the first stream sent after N, then the live ones. A run never depends on a connection: a client
that leaves (background or not) leaves the run going on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import azure.durable_functions as df
from azurefunctions.extensions.http.fastapi import Response

from agent_runs.services import RunServices
from http_api.caller import current_principal
from http_api.identity import Principal
from http_api.models import FINAL_STATUSES
from http_api.openai_responses.events import Draft, ResponseEventStream
from http_api.openai_responses.ids import ResponseRef
from http_api.openai_responses.mapping import build_response, message_item_id
from http_api.openai_responses.snapshots import previous_response_of, read_snapshot
from http_api.streams import sse
from http_api.streams.feeds import Refresh, RunFeed
from http_api.streams.handlers import open_stream
from http_api.streams.watchers import RunWatcher
from session_store import RunRecord


class ResponseFeed(RunFeed):
    """The run as the Responses routes read it: the watcher keeps the `RunSnapshot`; its updates are the seqs of the
    visible messages (what the watcher needs to tell a draft from a finished answer)."""

    kind = "response"

    def __init__(self, services: RunServices, client: df.DurableOrchestrationClient, run: RunRecord,
                 viewer: Principal) -> None:
        super().__init__(services, client, run, base_url="", viewer=viewer)
        self._previous: str | None = None  # the first turn's previous_response_id, read once
        self._previous_read = False

    async def refresh(self, state: Any, after: int) -> Refresh:
        if not self._previous_read:
            self._previous, self._previous_read = await previous_response_of(self.services, self.run), True
        snapshot = await read_snapshot(self.services, self.gateway, self.run, state, self._previous)
        status = {"status": snapshot.status}
        return Refresh(
            updates=[{"seq": m.seq} for m in snapshot.messages if m.seq > after],
            status=status,
            done=status if snapshot.status in FINAL_STATUSES else None,
            snapshot=snapshot,
        )


class ResponsePosition:
    """One client of one response: its events from the watcher's successive looks (a `StreamPosition`)."""

    def __init__(self, ref: ResponseRef, starting_after: int | None, background: bool | None) -> None:
        self.ref, self.background = ref, background
        self.events = ResponseEventStream(starting_after=starting_after)
        self._ended = False

    @property
    def finished(self) -> bool:
        return self._ended or self.events.finished

    def delivered(self, watcher: RunWatcher) -> bool:
        return False  # resumed by `starting_after` (the events have no ids), which an `EventSource` never sends

    def pending(self, watcher: RunWatcher) -> Iterator[bytes]:
        snapshot = watcher.snapshot
        response = build_response(snapshot, self.ref, background=self.background) if snapshot is not None else None
        if response is None:
            # A turn the watcher's look does not have yet (a shared watcher may read behind the route that found
            # it): the next look has it, unless the run is over.
            self._ended = watcher.done is not None
            return
        for event in self.events.feed(response, _draft(watcher)):
            yield sse.event(event["type"], event)
        if watcher.done is not None:
            self._ended = True  # nothing more will come (a finished run's turns are all final: a guard)


def _draft(watcher: RunWatcher) -> Draft | None:
    draft = watcher.draft
    # Only the model call the last status read names: the snapshot read with that status has every message before
    # it, so the draft's place among the output items is final (as `streams.connection.Position` waits for it).
    if draft is None or not draft.text or draft.seq != watcher.confirmed_draft_seq:
        return None
    return Draft(item_id=message_item_id(draft.message_id), text=draft.text)


async def open_response_stream(
    services: RunServices,
    client: df.DurableOrchestrationClient,
    run: RunRecord,
    ref: ResponseRef,
    *,
    starting_after: int | None = None,
    background: bool | None = None,
) -> Response:
    position = ResponsePosition(ref, starting_after, background)
    # The caller's rights are in no Responses event (an `mcp_approval_request` says none): clients share the watcher.
    viewer = current_principal()
    return await open_stream(lambda: ResponseFeed(services, client, run, viewer), ResponseFeed.kind, run.run_id,
                             position)
