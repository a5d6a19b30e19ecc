"""Between two writes of a Cosmos store call: the store's containers, stopping before the second replace while armed.
Either the host dies there (the first write done, the second never made), or another request's work lands there."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any


class HostKilled(Exception):
    """The host died in the middle of a store call."""


class KilledAfterOneWrite:
    """Put in place of a `CosmosSessionStore`'s containers (`arm(store)`); disarms itself at the second replace, where
    it raises `HostKilled`, or first awaits `meanwhile` and then writes."""

    def __init__(self, containers: Any, meanwhile: Callable[[], Awaitable[object]] | None) -> None:
        self._containers = containers
        self._meanwhile = meanwhile
        self.armed = True
        self._writes = 0

    @classmethod
    def arm(cls, store: Any, meanwhile: Callable[[], Awaitable[object]] | None = None) -> KilledAfterOneWrite:
        killer = cls(store._db, meanwhile)
        store._db = killer
        return killer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._containers, name)

    async def replace(self, name: str, item: dict[str, Any], etag: str | None) -> dict[str, Any] | None:
        if self.armed:
            self._writes += 1
            if self._writes == 2:
                self.armed = False
                if self._meanwhile is None:
                    raise HostKilled(name)
                await self._meanwhile()
        return await self._containers.replace(name, item, etag)
