"""One client's stream: from its position, what the shared watcher has that the client has not received.

`stream_events` is the transport loop of every stream (waits on the watcher, pings, time limit, release on leave);
what a client is sent is its position's business: `Position` (the run and workflow streams, below) or another
renderer of the watcher's look (`http_api.openai_responses.stream`).

Order within a batch: new updates (seq order), then the status if it changed, then the delta of the answer being
written (only for a draft above the last update delivered: the update at a draft's seq covers it, so a resumed
client never gets text twice; and only once every update below the draft is out, so text never runs ahead of the
tool results and decisions it follows), then `done` once every update is out. Each event's `id:` is the cursor
after it; a client back with `done`'s id has had everything (`delivered`) while that is still the run's `done`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Iterator
from dataclasses import replace
from typing import Any, Protocol

from azurefunctions.extensions.http.fastapi import StreamingResponse
from starlette.types import Receive, Scope, Send

from . import sse
from .cursor import ANY_DONE, Cursor
from .feeds import Draft
from .watchers import Lease, RunWatcher


class StreamPosition(Protocol):
    @property
    def finished(self) -> bool:
        """The client has everything: the stream ends."""
        ...

    def delivered(self, watcher: RunWatcher) -> bool:
        """The client had everything before it connected (`done` included): the route answers 204 No Content."""
        ...

    def pending(self, watcher: RunWatcher) -> Iterator[bytes]: ...


class Position:
    def __init__(self, cursor: Cursor) -> None:
        self._done_had = cursor.done
        self.cursor = replace(cursor, done="-")  # a run reopened since (a rewind) goes on from there
        self.finished = False

    def delivered(self, watcher: RunWatcher) -> bool:
        return (self._done_had != "-" and watcher.done is not None and self.cursor.seq >= watcher.last_seq
                and self._done_had in (ANY_DONE, watcher.done_fp))

    def pending(self, watcher: RunWatcher) -> Iterator[bytes]:
        """Everything the watcher has that this client has not been sent, advancing the cursor as it goes."""
        for update in watcher.updates_after(self.cursor.seq):
            self.cursor = self.cursor.after_update(update["seq"])
            yield sse.event("update", update, self.cursor.encode())
        if watcher.status and watcher.status_fp != self.cursor.status:
            self.cursor = self.cursor.with_status(watcher.status_fp)
            yield sse.event("status", watcher.status, self.cursor.encode())
        draft = watcher.draft
        if draft is not None and (draft.seq != watcher.confirmed_draft_seq or self.cursor.seq < watcher.last_seq):
            draft = None  # not before the updates below it: they are not all known, or not all sent yet
        if draft is not None and draft.seq > self.cursor.seq:
            data = self._delta(draft)
            if data is not None:
                self.cursor = self.cursor.with_draft(draft)
                yield sse.event("delta", data, self.cursor.encode())
        if watcher.done is not None and self.cursor.seq >= watcher.last_seq:
            self.finished = True
            yield sse.event("done", watcher.done, replace(self.cursor, done=watcher.done_fp).encode())

    def _delta(self, draft: Draft) -> dict[str, Any] | None:
        """The `delta` that brings this client's text of `draft` up to date, if it is behind."""
        sent = self.cursor.sent_of(draft)
        if sent is None:  # a retried model call started its answer over: the text so far replaces what was sent
            return {"message_id": draft.message_id, "text": draft.text, "replace": True}
        if len(draft.text) > sent:
            return {"message_id": draft.message_id, "text": draft.text[sent:]}
        return None


class EventStreamResponse(StreamingResponse):
    """The SSE response: its events' generator is closed when the response ends, however it ends.

    A server stops iterating a stream whose client left: when its `send` raised (an ASGI 2.4 server, an aborted
    write), or when the disconnect cancels the response while `send` waited on a slow client's full buffer. The
    generator is then left suspended at its `yield`, and its `finally` (the watcher's release) ran only when the
    garbage collector got to it: the exception's traceback holds it in a cycle, so the run's watcher went on polling
    the run for minutes after its last client had gone."""

    def __init__(self, events: AsyncGenerator[bytes, None], headers: dict[str, str]) -> None:
        super().__init__(events, media_type=sse.MEDIA_TYPE, headers=headers)
        self._events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._events.aclose()


async def stream_events(lease: Lease, position: StreamPosition, ping_seconds: float,
                        max_seconds: float = 0) -> AsyncGenerator[bytes, None]:
    """The SSE body; releases the watcher when the client leaves (the generator is cancelled), the run is done, or
    `max_seconds` (if not 0) have passed (the client then reconnects with its last event id)."""
    watcher = lease.watcher
    deadline = time.monotonic() + max_seconds if max_seconds else None
    try:
        await watcher.ready()
        while True:
            changed = watcher.changed()
            for chunk in position.pending(watcher):
                yield chunk
            if position.finished:
                return
            if watcher.failure is not None:
                return  # the watcher could not read the run; the client reconnects with its cursor
            wait = ping_seconds
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), wait)
                continue
            if deadline is None or time.monotonic() < deadline:
                yield sse.PING
    finally:
        lease.release()
