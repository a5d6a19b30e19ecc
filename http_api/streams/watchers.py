"""One watcher per run per process, shared by every stream of that run (locally, of that run through one host name:
the links in its views are built from the request's host where no public URL is configured).

A watcher reads the orchestration status (one status call per tick, backing off from
`STREAM_WATCH_MIN_INTERVAL_SECONDS` to `STREAM_WATCH_MAX_INTERVAL_SECONDS` while nothing changes) and, only when it
changed, rebuilds the run's view from the store, exactly like a long poll does. While a model answer is being
written it also follows the draft: token by token from `agent_runs.live_drafts` when the model call runs in this
process, else from the stored draft (written every `PARTIAL_OUTPUT_INTERVAL_SECONDS`). Connections never read the
store or the orchestration themselves: they wait on the watcher's `changed()` and take what they have not sent.
The watcher stops when its last connection leaves, or once the run has finished and been read to the end.
Each process (devhost worker, Azure instance) has its own watchers.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from agent_runs import live_drafts
from http_api.access import RightsKey, rights_field
from http_api.problems import ApiProblem
from http_api.request_context import run_path

from .cursor import done_fingerprint, fingerprint
from .feeds import Draft, Feed
from .settings import StreamSettings

log = logging.getLogger(__name__)
_MISSING: Any = object()
BACKOFF_FACTOR = 1.5


@dataclass
class WatcherStats:
    subscribers: int = 0
    state_reads: int = 0
    refreshes: int = 0
    draft_reads: int = 0
    live_drafts: int = 0


class RunWatcher:
    def __init__(self, key: tuple[str, str], feed: Feed, settings: StreamSettings,
                 on_idle: Callable[[RunWatcher], None]) -> None:
        self.key, self.feed, self.settings = key, feed, settings
        self.loop = asyncio.get_running_loop()  # the host's loop that serves its connections
        self._on_idle = on_idle
        self.updates: list[dict[str, Any]] = []
        self._seqs: list[int] = []
        self.status: dict[str, Any] = {}
        self.status_fp = "-"
        self.draft: Draft | None = None
        self.done: dict[str, Any] | None = None
        self.done_fp = "-"  # `done_fingerprint(done)`, once for every client (the done view holds the whole answer)
        self.snapshot: Any = None  # the feed's last reading (`Refresh.snapshot`), if it gives one
        self.stats = WatcherStats()
        self._changed = asyncio.Event()
        self._wake = asyncio.Event()
        self._ready = asyncio.Event()
        self._live_seq: int | None = None  # the draft seq this process is streaming token by token
        # The model call in flight per the orchestration status last read: its draft may be shown, because that
        # status's `visible_seq` covers every update below it (live tokens can arrive before the status is read).
        self.confirmed_draft_seq: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop_live: Callable[[], None] | None = None
        self.failure: BaseException | None = None

    # ----- for connections -----

    def subscribe(self) -> None:
        self.stats.subscribers += 1
        if self._task is None:
            if self.feed.writes_answers:
                self._stop_live = live_drafts.listen(self.feed.run_id, self._on_live_draft)
            self._task = asyncio.create_task(self._run(), name=f"stream-watcher-{self.feed.run_id}")

    def unsubscribe(self) -> None:
        self.stats.subscribers -= 1
        if self.stats.subscribers <= 0:
            self.close()

    async def ready(self) -> None:
        await self._ready.wait()

    def changed(self) -> asyncio.Event:
        """An event set at the next change (take it before reading the snapshot, then wait on it)."""
        return self._changed

    def updates_after(self, seq: int) -> Iterator[dict[str, Any]]:
        yield from self.updates[bisect.bisect_right(self._seqs, seq):]

    @property
    def last_seq(self) -> int:
        return self._seqs[-1] if self._seqs else -1

    @property
    def watching(self) -> bool:
        """Whether a new connection may share this watcher. One that failed, or stopped at the run's end, reads the
        run no more, while its last connections finish: a rewind may have reopened the run since, so a new stream
        starts a watcher of its own (one reading for a run that is still over)."""
        return self.failure is None and self.done is None

    def close(self) -> None:
        if self._stop_live is not None:
            self._stop_live()
            self._stop_live = None
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._on_idle(self)

    # ----- the loop -----

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _on_live_draft(self, draft: live_drafts.LiveDraft) -> None:
        self.stats.live_drafts += 1
        if draft.seq <= self.last_seq or self.done is not None:
            return  # already covered by a delivered update
        self._live_seq = draft.seq
        self.draft = Draft(draft.seq, draft.message_id, draft.text).grown(self.draft)
        if draft.seq == self.confirmed_draft_seq:
            self._notify()
        else:
            self._wake.set()  # read the orchestration status now: the updates below this draft come first

    async def _run(self) -> None:
        state = _MISSING
        interval = self.settings.watch_min_interval_seconds
        while True:
            try:
                new_state = await self.feed.read_state()
                self.stats.state_reads += 1
                changed = state is _MISSING or new_state != state
                if changed:
                    await self._refresh(new_state)
                    state = new_state
                    interval = self.settings.watch_min_interval_seconds
                confirmed = self.feed.draft_seq(new_state)
                if confirmed != self.confirmed_draft_seq:
                    self.confirmed_draft_seq = confirmed
                    self._notify()
                if self.done is None:
                    await self._follow_draft(new_state)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a store or status read failed: keep the streams, try again
                log.warning("stream watcher for %s: %s", self.feed.run_id, error, exc_info=True)
                if not self._ready.is_set():
                    self.failure = error
                    self._ready.set()
                    self._notify()
                    return
                changed = False
            self._ready.set()
            if self.done is not None:
                self._notify()
                return
            if not changed:
                interval = min(interval * BACKOFF_FACTOR, self.settings.watch_max_interval_seconds)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval)

    async def _refresh(self, state: Any) -> None:
        refresh = await self.feed.refresh(state, self.last_seq)
        self.stats.refreshes += 1
        grew = False
        for update in refresh.updates:
            if update["seq"] > self.last_seq:
                self.updates.append(update)
                self._seqs.append(update["seq"])
                grew = True
        if self.draft is not None and self.draft.seq <= self.last_seq:
            self.draft = None  # the finished answer arrived as an update
        if refresh.snapshot is not None and refresh.snapshot != self.snapshot:
            self.snapshot = refresh.snapshot
            grew = True
        status_fp = fingerprint(refresh.status)
        if status_fp != self.status_fp:
            self.status, self.status_fp = refresh.status, status_fp
            grew = True
        if refresh.done is not None:
            self.done, self.done_fp, self.draft = refresh.done, done_fingerprint(refresh.done), None
            grew = True
        if grew:
            self._notify()

    async def _follow_draft(self, state: Any) -> None:
        seq = self.feed.draft_seq(state)
        if seq is None or seq <= self.last_seq or seq == self._live_seq:
            return  # no answer being written, or this process streams it token by token
        stored = await self.feed.read_draft(seq)
        self.stats.draft_reads += 1
        if stored is None or not stored.text or seq == self._live_seq:
            return
        current = self.draft
        if current is None or current.seq != seq or stored.text != current.text:
            self.draft = stored.grown(current)
            self._notify()


class Lease:
    """One connection's hold on a watcher, released once (by the stream's end, or when a stream that never started
    is garbage-collected: an async generator that never ran does not run its `finally`)."""

    def __init__(self, watcher: RunWatcher) -> None:
        self.watcher = watcher
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self.watcher.unsubscribe()


MAX_LINK_ROOTS_PER_RUN = 4
"""Watchers of one run through distinct host names at once (locally: `localhost`, `127.0.0.1`, `[::1]`, a proxy's)."""
MAX_VIEWERS_PER_RUN = 16
"""Watchers of one run for distinct viewers at once, each polling the orchestration and the store (Cosmos RU). Only
a run's owner may stream it (`runs.run_or_404`), so its viewers are the role sets the owner's tokens hold at once: a
handful (a role granted or revoked mid-run, tokens of a few client apps); 16 leaves room for those, and bounds the
watchers of an owner whose tokens carry ever-new role sets."""

WatcherKey = tuple[int, str, str, str, RightsKey]
KIND, RUN, LINKS, VIEWER = 1, 2, 3, 4  # parts of a `WatcherKey`; a run's watchers take few values of the last two


def too_many_hosts(others: int, key: WatcherKey) -> ApiProblem:
    return ApiProblem(
        429, "too_many_stream_hosts", "Too many host names stream this run",
        f"This run is streamed through {others} other host names at once, the most there may be"
        f" ({MAX_LINK_ROOTS_PER_RUN}); stream it through one of them, or once one of their streams ends.",
        field="header.host",
    )


def too_many_viewers(others: int, key: WatcherKey) -> ApiProblem:
    return ApiProblem(
        429, "too_many_stream_viewers", "Too many role sets stream this run",
        f"This run is streamed at once by {others} tokens holding other roles, the most there may be"
        f" ({MAX_VIEWERS_PER_RUN}); poll it instead (GET {run_path(key[RUN], key[KIND])}), or stream it once one of"
        " their streams ends.",
        field=rights_field(key[VIEWER]),
    )


# What a new watcher of a run must not exceed: (the key's part, how many values, the problem past that).
CAPS: tuple[tuple[int, int, Callable[[int, WatcherKey], ApiProblem]], ...] = (
    (LINKS, MAX_LINK_ROOTS_PER_RUN, too_many_hosts),
    (VIEWER, MAX_VIEWERS_PER_RUN, too_many_viewers),
)


class WatcherRegistry:
    """The watchers of this process, by (kind, run id, links' root, viewer), per event loop (tests run several hosts in
    one process). The viewer is what the views it builds say each client may do with an approval for
    (`access.rights_key`): a client whose token holds other roles gets a watcher of its own, never another's rights.
    The links' root is the configured one on Azure (one watcher per run and viewer); locally it is the request's host,
    and a watcher shared across host names gave every client the links of whichever started it. Each watcher polls
    the run, so a run is watched through at most `MAX_LINK_ROOTS_PER_RUN` roots and by at most `MAX_VIEWERS_PER_RUN`
    viewers at once (`CAPS`): a local client sending a new `Host` header on each request, or an owner whose tokens
    carry ever-new role sets, started a watcher for each. A root or viewer already watching the run is never refused."""

    def __init__(self) -> None:
        self._watchers: dict[WatcherKey, RunWatcher] = {}

    def acquire(self, kind: str, run_id: str, make_feed: Callable[[], Feed], settings: StreamSettings,
                links: str = "", viewer: RightsKey = ()) -> RunWatcher:
        key: WatcherKey = (id(asyncio.get_running_loop()), kind, run_id, links, viewer)
        watcher = self._watchers.get(key)
        if watcher is None or not watcher.watching:
            runs = [k for k, w in self._watchers.items() if k[:RUN + 1] == key[:RUN + 1] and w.watching]
            for part, most, problem in CAPS:
                others = {k[part] for k in runs if k[part] != key[part]}
                if len(others) >= most:
                    raise problem(len(others), key)
            watcher = RunWatcher((kind, run_id), make_feed(), settings, lambda w: self._release(key, w))
            self._watchers[key] = watcher
        watcher.subscribe()
        return watcher

    def _release(self, key: WatcherKey, watcher: RunWatcher) -> None:
        if self._watchers.get(key) is watcher:
            del self._watchers[key]

    def totals(self) -> dict[str, int]:
        """The live streams of the calling event loop's host: its watchers and the connections they serve (`GET
        /api/health`). A process serves HTTP on one loop; tests run several hosts in one process, each on a loop of
        its own, and a host stopped mid-stream leaves its watchers behind on its closed loop: those are dropped."""
        loop = asyncio.get_running_loop()
        for key, watcher in list(self._watchers.items()):
            if watcher.loop.is_closed():
                del self._watchers[key]
        mine = [watcher for watcher in self._watchers.values() if watcher.loop is loop]
        return {"watchers": len(mine), "subscribers": sum(watcher.stats.subscribers for watcher in mine)}

    def stats(self, run_id: str) -> list[WatcherStats]:
        """What the watchers of `run_id` did (tests check that streams share one)."""
        return [w.stats for (_, _, rid, _, _), w in self._watchers.items() if rid == run_id]


REGISTRY = WatcherRegistry()
