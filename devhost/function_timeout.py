"""host.json `functionTimeout`: every invocation devhost makes (activity, HTTP, entity batch, orchestrator episode)
is bounded by it, in wall-clock time as on Azure.

What the host does on expiry: the invocation fails with the WebJobs `FunctionTimeoutException` text and the Functions
host restarts the worker process running it. Where the invocation ran in a worker process, devhost kills that
process (the pool starts a replacement); a sync function on one of this process's threads cannot be stopped, so its
thread keeps running in the background until the function returns (its result is discarded).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable
from datetime import timedelta
from typing import TypeVar

from devhost.protocol.timefmt import timespan_c

T = TypeVar("T")


class FunctionTimeoutError(Exception):
    """The invocation ran past `functionTimeout`; the message is the host's."""


def timeout_message(limit: timedelta, function_name: str) -> str:
    """`FunctionTimeoutException.Message` (WebJobs `FunctionExecutor`): the TimeSpan in its "c" format."""
    return f"Timeout value of {timespan_c(limit)} was exceeded by function: Functions.{function_name}"


async def bounded(awaitable: Awaitable[T], limit: timedelta | None, function_name: str,
                  executor: object = None) -> T:
    """Await `awaitable`, cancelling it and raising `FunctionTimeoutError` once `limit` has passed (None: no limit).

    With an `executor` that has worker processes, the time starts once one of them can take the call (not while a
    replacement worker is still starting)."""
    if limit is None:
        return await awaitable
    wait_ready = getattr(executor, "wait_ready", None)
    if wait_ready is not None:
        await wait_ready()
    deadline = _watch(limit.total_seconds())
    try:
        return await awaitable
    except asyncio.CancelledError:
        if deadline.expired and deadline.task.uncancel() <= deadline.cancelling:
            raise FunctionTimeoutError(timeout_message(limit, function_name)) from None  # our cancel, nobody else's
        raise
    finally:
        deadline.release()


class _Deadline:
    """One invocation's deadline: what `asyncio.timeout` tracks, without a timer handle per invocation."""

    __slots__ = ("at", "cancelling", "expired", "task", "watch")

    def __init__(self, watch: _Deadlines, task: asyncio.Task[object], at: float) -> None:
        self.watch = watch
        self.task = task
        self.at = at
        self.cancelling = task.cancelling()
        self.expired = False

    def release(self) -> None:
        self.watch.pending.discard(self)


class _Deadlines:
    """The deadlines of one loop's bounded invocations, watched by one timer set for the earliest of them.

    A released deadline leaves the timer as it is (it then fires for nothing and is set for the next earliest one):
    setting and cancelling a loop timer per invocation cost ~10x the rest of `bounded`."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: set[_Deadline] = set()
        self.timer: asyncio.TimerHandle | None = None

    def add(self, seconds: float) -> _Deadline:
        task = asyncio.current_task(self.loop)
        if task is None:
            raise RuntimeError("bounded() must run inside a task")
        deadline = _Deadline(self, task, self.loop.time() + seconds)
        self.pending.add(deadline)
        if self.timer is None or deadline.at < self.timer.when():
            self._set_timer(deadline.at)
        return deadline

    def _set_timer(self, at: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.loop.call_at(at, self._expire)

    def _expire(self) -> None:
        """As `asyncio.timeout` on expiry: cancel the task that waits (its `bounded` turns that into the error)."""
        self.timer = None
        now = self.loop.time()
        for deadline in [d for d in self.pending if d.at <= now]:
            self.pending.discard(deadline)
            deadline.expired = True
            deadline.task.cancel()
        if self.pending:
            self._set_timer(min(d.at for d in self.pending))


_WATCH_ATTRIBUTE = "_devhost_function_deadlines"
_WATCHES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Deadlines] = weakref.WeakKeyDictionary()


def _watch(seconds: float) -> _Deadline:
    """A deadline `seconds` from now for the current task, on its loop's watch (kept on the loop object itself: it
    goes with the loop; a loop that takes no attributes keeps it in a table by loop)."""
    loop = asyncio.get_running_loop()
    watch: _Deadlines | None = getattr(loop, _WATCH_ATTRIBUTE, None) or _WATCHES.get(loop)
    if watch is None:
        watch = _Deadlines(loop)
        try:
            setattr(loop, _WATCH_ATTRIBUTE, watch)
        except AttributeError:
            _WATCHES[loop] = watch
    return watch.add(seconds)
