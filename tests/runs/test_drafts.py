"""DraftWriter: the streamed draft of a model answer (throttled writes, same id as the answer, retries replace)."""

from __future__ import annotations

import asyncio

from agent_runs.drafts import DraftWriter
from agent_runtime.conversation import InMemoryConversationLog, model_message_id
from agent_runtime.messages import ChatResponseUpdate


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def update(text: str, response_id: str = "resp-1") -> ChatResponseUpdate:
    return ChatResponseUpdate(role="assistant", contents=text, response_id=response_id)


async def stored_text(log: InMemoryConversationLog) -> list[str]:
    return [m.text for m in await log.messages()]


async def test_writes_are_throttled_and_carry_the_answers_own_id() -> None:
    log, clock = InMemoryConversationLog(), FakeClock()
    draft = DraftWriter(log, "run-1", 2, author_name="helper", interval_seconds=0.5, clock=clock)

    await draft.on_update(update("Hel"))
    assert await stored_text(log) == []  # within the interval: nothing written yet
    clock.t += 0.6
    await draft.on_update(update("lo"))
    assert await stored_text(log) == ["Hello"]
    await draft.on_update(update(" world"))
    assert await stored_text(log) == ["Hello"]  # throttled
    clock.t += 0.6
    await draft.on_update(update("!"))
    messages = await log.messages()
    assert [m.text for m in messages] == ["Hello world!"]
    assert messages[0].message_id == model_message_id("run-1", 2, 0)  # the finished answer replaces it in place
    await draft.finish()


async def test_a_retried_response_replaces_the_previous_attempts_text() -> None:
    log, clock = InMemoryConversationLog(), FakeClock()
    draft = DraftWriter(log, "run-1", 1, author_name=None, interval_seconds=0, clock=clock)
    await draft.on_update(update("first attempt", "resp-1"))
    await draft.on_update(update("second", "resp-2"))
    await draft.on_update(update(" try", "resp-2"))
    assert draft.text == "second try"
    assert await stored_text(log) == ["second try"]


class HeldSleep:
    """The trailing write's wait, ended by the test (`end()`), with the delay it was asked for."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self._done = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        await self._done.wait()

    async def end(self) -> None:
        self._done.set()
        await settle()


async def settle() -> None:
    """Let the writer's task run up to its next real wait."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_text_held_back_by_the_throttle_is_written_when_the_interval_ends() -> None:
    """A model that pauses mid-answer: the tokens after the last write reach the store without waiting for more."""
    log, clock, sleep = InMemoryConversationLog(), FakeClock(), HeldSleep()
    draft = DraftWriter(log, "run-1", 1, author_name=None, interval_seconds=0.5, clock=clock, sleep=sleep)
    clock.t += 0.2
    await draft.on_update(update("Once upon"))
    await draft.on_update(update(" a time"))
    await settle()
    assert await stored_text(log) == [] and len(sleep.asked) == 1  # one trailing write for both
    assert abs(sleep.asked[0] - 0.3) < 1e-9  # due when the interval since the call began ends
    await sleep.end()
    assert await stored_text(log) == ["Once upon a time"]
    await draft.finish()
    assert await stored_text(log) == ["Once upon a time"]


async def test_no_draft_write_follows_the_end_of_the_stream() -> None:
    """The answer stored after the stream replaces the draft: a trailing write still waiting is dropped."""
    log, clock, sleep = InMemoryConversationLog(), FakeClock(), HeldSleep()
    draft = DraftWriter(log, "run-1", 1, author_name=None, interval_seconds=0.5, clock=clock, sleep=sleep)
    await draft.on_update(update("partial"))
    await settle()
    assert len(sleep.asked) == 1
    await draft.finish()
    await sleep.end()
    assert await stored_text(log) == []


class HeldAppendLog(InMemoryConversationLog):
    """A store write that takes a while (held until the test lets it finish)."""

    def __init__(self) -> None:
        super().__init__()
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def append(self, message):  # type: ignore[no-untyped-def]
        self.started.set()
        await self.release.wait()
        await super().append(message)


async def test_a_trailing_write_under_way_when_the_stream_ends_completes_before_finish_returns() -> None:
    """The stream ends while the trailing write is in the store: `finish` waits for it (cancelling it could let it
    land after the answer), and nothing is written after `finish` returns; tokens arriving meanwhile wait for it."""
    log, clock, sleep = HeldAppendLog(), FakeClock(), HeldSleep()
    draft = DraftWriter(log, "run-1", 1, author_name=None, interval_seconds=0.5, clock=clock, sleep=sleep)
    await draft.on_update(update("first"))
    await sleep.end()
    await log.started.wait()  # the trailing write is in the store now
    await draft.on_update(update(" second"))  # arrives during that write: no second, concurrent write
    finishing = asyncio.create_task(draft.finish())
    await settle()
    assert not finishing.done()  # it waits for the write under way
    log.release.set()
    await finishing
    stored = await stored_text(log)
    await settle()
    assert stored == ["first"] and await stored_text(log) == ["first"]  # no write after the end


async def _writes_of_a_streamed_answer(seconds: float, **intervals: float) -> list[float]:
    """The times (seconds into the answer) of the draft writes of an answer streaming a token every 1/64 s (a binary
    fraction, so that the clock lands exactly on every interval's end)."""
    clock = FakeClock()
    start = clock.t
    written: list[float] = []

    class TimedLog(InMemoryConversationLog):
        async def append(self, message):  # type: ignore[no-untyped-def]
            written.append(clock.t - start)
            await super().append(message)

    never = HeldSleep()  # trailing writes never come due: every write here is made by a token arriving late enough
    draft = DraftWriter(TimedLog(), "run-1", 1, author_name=None, clock=clock, sleep=never, **intervals)
    for _ in range(int(seconds * 64)):
        clock.t += 1 / 64
        await draft.on_update(update("tok "))
    await draft.finish()
    return written


async def test_a_long_answer_is_drafted_less_often_as_it_goes_on() -> None:
    """Each draft write stores the whole text so far (~6-7 RU on Cosmos): a 20 s answer at a constant 0.5 s cost ~40
    writes. The interval grows 1.5x a write up to the maximum: the first text still shows after 0.5 s."""
    written = await _writes_of_a_streamed_answer(20, interval_seconds=0.5, max_interval_seconds=2.0)
    assert written == [0.5, 1.25, 2.375, 4.0625, *(6.0625 + 2 * n for n in range(7))]  # then every 2 s: 11 writes
    constant = await _writes_of_a_streamed_answer(20, interval_seconds=0.5)  # no maximum given: the interval stays
    assert constant == [0.5 * n for n in range(1, 41)]


async def test_a_maximum_below_the_first_interval_keeps_the_interval_constant() -> None:
    written = await _writes_of_a_streamed_answer(6, interval_seconds=1.0, max_interval_seconds=0.5)
    assert written == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


async def test_a_retried_responses_text_is_drafted_within_the_first_interval_again() -> None:
    """The interval grown over a long first attempt is not the retry's: its text replaces the first attempt's, which a
    poller on another instance would otherwise go on reading for up to the maximum interval."""
    log, clock, never = InMemoryConversationLog(), FakeClock(), HeldSleep()
    draft = DraftWriter(log, "run-1", 1, author_name=None, interval_seconds=0.5, max_interval_seconds=2.0,
                        clock=clock, sleep=never)
    for waited in (0.5, 0.75, 1.125, 1.6875):  # four writes: the interval is now at its maximum
        clock.t += waited
        await draft.on_update(update("tok ", "resp-1"))
    assert await stored_text(log) == ["tok tok tok tok "]
    clock.t += 0.6
    await draft.on_update(update("second", "resp-2"))
    assert await stored_text(log) == ["second"]
    clock.t += 0.75
    await draft.on_update(update(" try", "resp-2"))
    assert await stored_text(log) == ["second try"]  # and it grows from the first interval again
    await draft.finish()
