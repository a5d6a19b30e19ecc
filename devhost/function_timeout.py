"""host.json `functionTimeout`: every invocation devhost makes (activity, HTTP, entity batch, orchestrator episode)
is bounded by it, in wall-clock time as on Azure.

What the host does on expiry: the invocation fails with the WebJobs `FunctionTimeoutException` text and the Functions
host restarts the worker process running it. Where the invocation ran in a worker process, devhost kills that
process (the pool starts a replacement); a sync function on one of this process's threads cannot be stopped, so its
thread keeps running in the background until the function returns (its result is discarded).
"""

from __future__ import annotations

import asyncio
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
    wait_ready = getattr(executor, "wait_ready", None)
    if limit is None:
        return await awaitable
    if wait_ready is not None:
        await wait_ready()
    try:
        async with asyncio.timeout(limit.total_seconds()) as scope:
            return await awaitable
    except TimeoutError:
        if scope.expired():
            raise FunctionTimeoutError(timeout_message(limit, function_name)) from None
        raise
