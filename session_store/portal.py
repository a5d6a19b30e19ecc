"""A dedicated event-loop thread that owns loop-bound clients (the Cosmos aio client and its aiohttp session).

Why: the Functions worker and devhost may run async activities on different event loops and threads, while an aio
client must only ever be used from the loop it was created on. The store therefore creates its client on this one
loop and marshals every call to it; callers on any loop just ``await`` the result.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopPortal:
    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the portal loop and await it from whatever loop the caller is on."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Block the calling thread (never the portal's own) until ``coro`` finished on the portal loop."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("run_sync called from the portal thread would deadlock")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def close(self) -> None:
        if not self._loop.is_running():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
