"""Streamed drafts: the text of a model answer so far, stored while the answer streams in.

The draft is the answer's first message (same deterministic id, same seq), so the finished answer simply replaces
it and a retried call overwrites it. Pollers read it as `partial_output` (it sits above `visible_seq`, so it never
counts as an update: updates stay exactly-once). Writes are throttled: at most one per interval per model call,
and text held back by the throttle is written when the interval ends even if no token follows (a model that pauses
mid-answer, or a stream held by a slow network, still shows a reader on another instance everything received so far).

The interval grows by `INTERVAL_GROWTH` after each write, up to `max_interval_seconds`: each write stores the whole
text so far (on Cosmos a point read of the run and an upsert, ~6-7 RU), so a constant 0.5 s cost a 20-second answer
~40 writes, several times what the rest of its run costs. Growing, the first text still shows within the first
interval and a long answer costs a write per maximum interval (11 writes for those 20 s with 0.5 s growing to 2 s).
Streams served by the process running the call get every token live (`live_drafts`), never the stored draft.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from agent_runs.live_drafts import LiveDraft, listening, publish
from agent_runtime.conversation import ConversationLog, model_message_id
from agent_runtime.messages import ChatResponseUpdate, Message, TextContent
from agent_runtime.unicode_text import well_formed

INTERVAL_GROWTH = 1.5


class DraftWriter:
    def __init__(
        self,
        log: ConversationLog,
        run_id: str,
        iteration: int,
        *,
        author_name: str | None,
        interval_seconds: float,
        max_interval_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        seq: int | None = None,
    ) -> None:
        self._log = log
        self._run_id = run_id
        self._message_id = model_message_id(run_id, iteration, 0)
        self._author_name = author_name
        self._first_interval = self._interval = interval_seconds
        # Never below the first interval: a setting of a longer first interval than the maximum keeps it constant.
        self._max_interval = max(interval_seconds, max_interval_seconds if max_interval_seconds is not None
                                 else interval_seconds)
        self._clock = clock
        self._sleep = sleep
        self._seq = seq  # where the draft is stored: with it, every token is also published live (in-process)
        self._text = ""
        self._written = ""
        self._response_id: str | None = None
        self._last_write = clock()
        self._trailing: asyncio.Task[None] | None = None  # the write due when the interval ends
        self._trailing_writes = False  # that write is under way: it is awaited, never cancelled

    @property
    def text(self) -> str:
        return self._text

    async def on_update(self, update: ChatResponseUpdate) -> None:
        if update.response_id and update.response_id != self._response_id:
            # A new response (chat middleware retried the call): its text replaces the previous attempt's, shown
            # as soon as a first text is (the interval grown over the failed attempt is not the new one's).
            if self._response_id is not None:
                self._text, self._interval = "", self._first_interval
            self._response_id = update.response_id
        text = update.text
        self._text += text
        if self._seq is not None and text and listening(self._run_id):
            publish(LiveDraft(self._run_id, self._seq, self._message_id, self._text))
        if self._text == self._written:
            return
        if self._trailing is not None:
            if self._trailing_writes or self._clock() - self._last_write < self._interval:
                return  # the trailing write takes this text (it looks again after its write)
            await self._drop_trailing()  # due now by this writer's clock: this token writes
        wait = self._last_write + self._interval - self._clock()
        if wait <= 0:
            await self._write()
        else:
            self._trailing = asyncio.create_task(self._write_after(wait))

    async def finish(self) -> None:
        """The stream has ended (answered or failed): no draft write may follow, because the answer stored next
        replaces the draft in place. A trailing write still waiting is dropped; one under way is awaited (a write
        cancelled mid-way could still land after the answer, from the store's thread)."""
        await self._drop_trailing()

    async def _drop_trailing(self) -> None:
        trailing, self._trailing = self._trailing, None
        if trailing is None:
            return
        if not self._trailing_writes:
            trailing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await trailing
        self._trailing_writes = False

    async def _write_after(self, wait: float) -> None:
        while True:
            await self._sleep(wait)
            if self._trailing is not asyncio.current_task():
                return  # dropped while it slept
            self._trailing_writes = True
            await self._write()
            self._trailing_writes = False
            if self._text == self._written or self._trailing is not asyncio.current_task():
                break
            wait = self._interval  # tokens arrived during the write
        self._trailing = None

    async def _write(self) -> None:
        draft = Message(
            role="assistant",
            contents=[TextContent(text=well_formed(self._text))],  # a lone surrogate streamed could not be stored
            message_id=self._message_id,
            author_name=self._author_name,
        )
        await self._log.append(draft)
        self._written = self._text
        self._last_write = self._clock()
        self._interval = min(self._interval * INTERVAL_GROWTH, self._max_interval)
