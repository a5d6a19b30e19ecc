"""Opening a stream (`http_api.streams.handlers.open_stream`): a stream given up before it starts - the client left
or the function timed out while the run's watcher takes its first reading - releases the watcher; and a stream
opened once a run's watcher has stopped at its end gets a watcher of its own (the run may have been rewound)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from http_api.streams.connection import Position
from http_api.streams.cursor import Cursor
from http_api.streams.feeds import Draft, Refresh
from http_api.streams.handlers import open_stream
from http_api.streams.settings import StreamSettings
from http_api.streams.watchers import REGISTRY, Lease


class StalledFeed:
    """A run whose first reading does not come back (a slow status call or store read)."""

    kind = "run"
    writes_answers = True

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.reads = 0
        self.reading = asyncio.Event()

    async def read_state(self) -> Any:
        self.reads += 1
        self.reading.set()
        await asyncio.Event().wait()

    async def refresh(self, state: Any, after: int) -> Refresh:
        raise AssertionError("never read")

    def draft_seq(self, state: Any) -> int | None:
        return None

    async def read_draft(self, seq: int) -> Draft | None:
        return None


async def _assert_released(before: dict[str, int], run_id: str) -> None:
    """Nothing of the run's streams is left: counts as before, no stats, no watcher task."""
    for _ in range(4):  # a watcher cancelled in its wait between looks takes a few turns of the loop to end
        await asyncio.sleep(0)
    assert REGISTRY.totals() == before
    assert REGISTRY.stats(run_id) == []
    assert not [t for t in asyncio.all_tasks() if t.get_name() == f"stream-watcher-{run_id}" and not t.done()]


async def test_a_stream_cancelled_before_its_first_event_releases_the_watcher() -> None:
    before = REGISTRY.totals()
    feed = StalledFeed("run-stalled-open")
    opening = asyncio.create_task(open_stream(lambda: feed, "run", feed.run_id, Position(Cursor())))
    await feed.reading.wait()
    assert REGISTRY.totals() == {"watchers": before["watchers"] + 1, "subscribers": before["subscribers"] + 1}
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    await _assert_released(before, feed.run_id)


async def test_two_streams_cancelled_together_before_their_first_event_release_their_shared_watcher() -> None:
    """Two clients following one run leave together while its watcher takes its first reading: one watcher (one
    reading) served both, and it goes with the last of them."""
    before = REGISTRY.totals()
    feed = StalledFeed("run-stalled-open-twice")
    openings = [
        asyncio.create_task(open_stream(lambda: feed, "run", feed.run_id, Position(Cursor()))) for _ in range(2)
    ]
    await feed.reading.wait()
    await asyncio.sleep(0)  # the second opening subscribes too
    assert REGISTRY.totals() == {"watchers": before["watchers"] + 1, "subscribers": before["subscribers"] + 2}
    assert feed.reads == 1
    for opening in openings:
        opening.cancel()
    for opening in openings:
        with pytest.raises(asyncio.CancelledError):
            await opening
    await _assert_released(before, feed.run_id)


class RewoundFeed:
    """A run that has failed, until a rewind reopens it (`running`)."""

    kind = "run"
    writes_answers = False

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.running = False

    async def read_state(self) -> Any:
        return "running" if self.running else "failed"

    async def refresh(self, state: Any, after: int) -> Refresh:
        status = {"status": "in_progress" if state == "running" else "failed", "pending_approvals": []}
        return Refresh([], status, None if state == "running" else {"status": "failed"})

    def draft_seq(self, state: Any) -> int | None:
        return None

    async def read_draft(self, seq: int) -> Draft | None:
        return None


async def test_a_stream_opened_after_a_rewind_follows_the_run_again_while_an_older_one_lingers() -> None:
    """A connection still sending the failed run's end (a slow client) keeps the watcher that stopped there; a stream
    opened after the run was rewound must not be handed that watcher's `done`."""
    feed = RewoundFeed("run-rewound")
    settings = StreamSettings()
    first = Lease(REGISTRY.acquire("run", feed.run_id, lambda: feed, settings))
    try:
        await first.watcher.ready()
        assert first.watcher.done == {"status": "failed"}
        feed.running = True  # rewound while the first connection is still open
        second = Lease(REGISTRY.acquire("run", feed.run_id, lambda: feed, settings))
        try:
            await second.watcher.ready()
            assert second.watcher.done is None
            assert second.watcher.status["status"] == "in_progress"
        finally:
            second.release()
    finally:
        first.release()
    assert REGISTRY.stats(feed.run_id) == []


def test_a_stream_ends_by_default_before_the_host_cuts_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream is one HTTP invocation, cut by the host at `functionTimeout` (this app's host.json; 5 minutes on the
    Consumption plan by default): unless told otherwise, a stream ends itself before, between events."""
    from datetime import timedelta
    from pathlib import Path

    from devhost.http.host_config import HostConfig

    monkeypatch.delenv("STREAM_MAX_SECONDS", raising=False)
    app_timeout = HostConfig.load(Path(__file__).resolve().parents[2]).function_timeout
    assert app_timeout is not None
    limit = StreamSettings().max_seconds
    assert 0 < limit < min(app_timeout, timedelta(minutes=5)).total_seconds()


async def test_clients_back_after_done_together_get_204_and_leave_no_watcher_behind() -> None:
    """Two clients back with `done`'s id at once (two tabs' `EventSource`s): both answered 204, the watcher that
    served them released with the last; and a rewind since turns the same id back into a stream."""
    before = REGISTRY.totals()
    feed = RewoundFeed("run-done-twice")
    first = await open_stream(lambda: feed, "run", feed.run_id, Position(Cursor()))
    events = [chunk async for chunk in first.body_iterator]  # type: ignore[attr-defined]
    done_id = events[-1].decode().split("\nid: ")[1].split("\n")[0]
    await _assert_released(before, feed.run_id)
    back = await asyncio.gather(
        *(open_stream(lambda: feed, "run", feed.run_id, Position(Cursor.parse(done_id))) for _ in range(2))
    )
    assert [r.status_code for r in back] == [204, 204]
    await _assert_released(before, feed.run_id)
    feed.running = True  # rewound
    resumed = await open_stream(lambda: feed, "run", feed.run_id, Position(Cursor.parse(done_id)))
    assert resumed.status_code == 200
    await resumed.body_iterator.aclose()  # type: ignore[attr-defined]
    del resumed
    await _assert_released(before, feed.run_id)


def _asgi_scope(spec_version: str) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": spec_version}, "method": "GET",
            "path": "/api/runs/run/stream", "headers": []}


async def _write_refused(message: dict[str, Any]) -> None:
    """An ASGI 2.4 server's `send` once its client has gone: the write raises."""
    if message["type"] == "http.response.body":
        raise ConnectionResetError("the client closed the connection")


@pytest.mark.parametrize("server", ["send raises (ASGI 2.4)", "disconnect while send waits (ASGI 2.3)"])
async def test_a_client_gone_while_an_event_is_written_releases_the_watcher_when_the_response_ends(
    server: str
) -> None:
    """The server stops iterating the stream while its generator waits at a `yield`: its `send` raised (the client
    left), or the client's disconnect cancelled the response while `send` waited on a slow client's full buffer.
    The watcher is released as the response ends, not whenever the garbage collector finds the abandoned generator
    (the collector is off here, as it is between its runs: the generator sits in a reference cycle)."""
    import gc

    before = REGISTRY.totals()
    feed = RewoundFeed("run-left-mid-write")
    feed.running = True
    response = await open_stream(lambda: feed, "run", feed.run_id, Position(Cursor()))
    assert REGISTRY.totals() == {"watchers": before["watchers"] + 1, "subscribers": before["subscribers"] + 1}
    writing = asyncio.Event()

    async def stalled_write(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            writing.set()
            await asyncio.Event().wait()

    async def disconnect_once_writing() -> dict[str, Any]:
        await writing.wait()
        return {"type": "http.disconnect"}

    gc.disable()
    try:
        if server.startswith("send raises"):
            from starlette.requests import ClientDisconnect

            with pytest.raises(ClientDisconnect):
                await response(_asgi_scope("2.4"), disconnect_once_writing, _write_refused)
        else:
            await response(_asgi_scope("2.3"), disconnect_once_writing, stalled_write)
        await _assert_released(before, feed.run_id)
    finally:
        gc.enable()
