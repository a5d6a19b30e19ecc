"""A `CosmosSessionStore`'s container refusing a write (a 503 from the real SDK's container, nothing written): shared by
the e2e and workflow tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest


@contextmanager
def cosmos_writes_refused(
    store: Any, container: str, method: str = "create_item", *, when: Callable[..., bool] | None = None,
    times: int | None = None,
) -> Iterator[list[str]]:
    """Meanwhile a `CosmosSessionStore`'s `container` refuses `method` (a 503 from the real SDK's container, nothing
    written): every call, or those `when` picks (given the call's arguments), at most `times` of them; the others
    go through. Yields the ids of the items refused."""
    from azure.cosmos.exceptions import CosmosHttpResponseError

    proxy = store._db._c[container]
    write = getattr(proxy, method)
    refused: list[str] = []

    async def unavailable(first: Any, *args: Any, **kwargs: Any) -> Any:
        if (times is not None and len(refused) >= times) or (when is not None and not when(first, *args, **kwargs)):
            return await write(first, *args, **kwargs)
        refused.append(str(first if isinstance(first, str) else first["id"]))  # an item's id, or the item
        raise CosmosHttpResponseError(status_code=503, message="Service Unavailable (injected)")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(proxy, method, unavailable)
        yield refused


@dataclass
class WriteFault:
    """The `at`-th write (0-based) a `CosmosSessionStore` makes once armed fails with a 503; `lost`: after the store
    took it (its answer lost: a timeout, a host stopped). `hit`: the container and method of the write that failed."""

    at: int
    lost: bool
    armed: bool = False
    count: int = 0
    hit: tuple[str, str] | None = None


WRITE_METHODS = ("create_item", "replace_item", "upsert_item")


@contextmanager
def cosmos_write_fails(store: Any, fault: WriteFault) -> Iterator[WriteFault]:
    """Meanwhile every container of a `CosmosSessionStore` counts the writes made while `fault.armed`, and the
    `fault.at`-th fails (the real SDK's 503), before or after it lands (`fault.lost`)."""
    from azure.cosmos.exceptions import CosmosHttpResponseError

    def failing_once(write: Any, container: str, method: str) -> Any:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            if not fault.armed:
                return await write(*args, **kwargs)
            index, fault.count = fault.count, fault.count + 1
            if index != fault.at:
                return await write(*args, **kwargs)
            fault.hit = (container, method)
            if fault.lost:
                await write(*args, **kwargs)
            raise CosmosHttpResponseError(status_code=503, message="Service Unavailable (injected)")

        return counted

    with pytest.MonkeyPatch.context() as patch:
        for container, proxy in store._db._c.items():
            for method in WRITE_METHODS:
                patch.setattr(proxy, method, failing_once(getattr(proxy, method), container, method))
        yield fault
