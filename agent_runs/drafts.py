"""Streamed drafts: the text of a model answer so far, stored while the answer streams in.

The draft is the answer's first message (same deterministic id, same seq), so the finished answer simply replaces
it and a retried call overwrites it. Pollers read it as `partial_output` (it sits above `visible_seq`, so it never
counts as an update: updates stay exactly-once). Writes are throttled: at most one per interval per model call.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from agent_runs.live_drafts import LiveDraft, publish
from agent_runtime.conversation import ConversationLog, model_message_id
from agent_runtime.messages import ChatResponseUpdate, Message, TextContent


class DraftWriter:
    def __init__(
        self,
        log: ConversationLog,
        run_id: str,
        iteration: int,
        *,
        author_name: str | None,
        interval_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        seq: int | None = None,
    ) -> None:
        self._log = log
        self._run_id = run_id
        self._message_id = model_message_id(run_id, iteration, 0)
        self._author_name = author_name
        self._interval = interval_seconds
        self._clock = clock
        self._seq = seq  # where the draft is stored: with it, every token is also published live (in-process)
        self._text = ""
        self._written = ""
        self._response_id: str | None = None
        self._last_write = clock()

    @property
    def text(self) -> str:
        return self._text

    async def on_update(self, update: ChatResponseUpdate) -> None:
        if update.response_id and update.response_id != self._response_id:
            # A new response (chat middleware retried the call): its text replaces the previous attempt's.
            self._text = "" if self._response_id is not None else self._text
            self._response_id = update.response_id
        self._text += update.text
        if self._seq is not None and update.text:
            publish(LiveDraft(self._run_id, self._seq, self._message_id, self._text))
        if self._text != self._written and self._clock() - self._last_write >= self._interval:
            await self._write()

    async def _write(self) -> None:
        draft = Message(
            role="assistant",
            contents=[TextContent(text=self._text)],
            message_id=self._message_id,
            author_name=self._author_name,
        )
        await self._log.append(draft)
        self._written = self._text
        self._last_write = self._clock()
