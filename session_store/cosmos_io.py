"""Thin async helpers over the Cosmos containers: not-found is ``None``, conflicts are ``None``/``False``.

Everything else an SDK call raises is translated once, at the store boundary, by ``translate_errors``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Iterable
from typing import Any, TypeVar

from azure.core import MatchConditions
from azure.core.exceptions import AzureError
from azure.cosmos.aio import ContainerProxy
from azure.cosmos.exceptions import (
    CosmosAccessConditionFailedError,
    CosmosHttpResponseError,
    CosmosResourceExistsError,
    CosmosResourceNotFoundError,
)

from .errors import StoreError, StoreUnavailableError

T = TypeVar("T")
PARALLEL_WRITES = 16


async def translate_errors(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro``; SDK failures that the store did not handle become ``StoreUnavailableError``."""
    try:
        return await coro
    except StoreError:
        raise
    except CosmosHttpResponseError as exc:
        message = (exc.message or "").strip().splitlines()[0] if exc.message else type(exc).__name__
        raise StoreUnavailableError(f"Cosmos DB request failed: HTTP {exc.status_code} {message}") from exc
    except AzureError as exc:
        raise StoreUnavailableError(f"Cosmos DB is unreachable: {exc}") from exc


class CosmosContainers:
    def __init__(self, proxies: dict[str, ContainerProxy]) -> None:
        self._c = proxies

    async def read(self, name: str, item_id: str, partition_key: str) -> dict[str, Any] | None:
        try:
            return await self._c[name].read_item(item_id, partition_key=partition_key)
        except CosmosResourceNotFoundError:
            return None

    async def query(
        self, name: str, sql: str, partition_key: str | None, **params: Any
    ) -> list[Any]:
        """Single-partition query when ``partition_key`` is given (the SQL must filter on it too)."""
        parameters = [{"name": f"@{k}", "value": v} for k, v in params.items()]
        kwargs: dict[str, Any] = {"partition_key": partition_key} if partition_key is not None else {}
        items = self._c[name].query_items(sql, parameters=parameters, **kwargs)
        return [item async for item in items]

    async def query_page(
        self, name: str, sql: str, *, page_size: int, continuation: str | None, **params: Any
    ) -> tuple[list[Any], str | None]:
        """One page of a cross-partition query and the SDK's continuation token for the next."""
        parameters = [{"name": f"@{k}", "value": v} for k, v in params.items()]
        pages = self._c[name].query_items(sql, parameters=parameters, max_item_count=page_size).by_page(continuation)
        async for page in pages:
            return [item async for item in page], pages.continuation_token
        return [], None

    async def create(self, name: str, item: dict[str, Any]) -> dict[str, Any] | None:
        """The created item, or ``None`` if one with this id (or unique key) exists."""
        try:
            return await self._c[name].create_item(item)
        except CosmosResourceExistsError:
            return None

    async def replace(self, name: str, item: dict[str, Any], etag: str | None) -> dict[str, Any] | None:
        """The replaced item, or ``None`` if its ETag changed (or it vanished) since it was read."""
        try:
            return await self._c[name].replace_item(
                item["id"], item, etag=etag, match_condition=MatchConditions.IfNotModified if etag else None
            )
        except (CosmosAccessConditionFailedError, CosmosResourceNotFoundError):
            return None

    async def upsert(self, name: str, item: dict[str, Any]) -> dict[str, Any] | None:
        """The written item, or ``None`` if a unique key (``/seq`` of messages) belongs to another item."""
        try:
            return await self._c[name].upsert_item(item)
        except CosmosResourceExistsError:
            return None

    async def delete(self, name: str, item_id: str, partition_key: str) -> bool:
        try:
            await self._c[name].delete_item(item_id, partition_key=partition_key)
            return True
        except CosmosResourceNotFoundError:
            return False


async def bounded_gather(awaitables: Iterable[Awaitable[T]], limit: int = PARALLEL_WRITES) -> list[T]:
    """``asyncio.gather`` with at most ``limit`` requests in flight (keeps 429s and memory in check)."""
    semaphore = asyncio.Semaphore(limit)

    async def one(awaitable: Awaitable[T]) -> T:
        async with semaphore:
            return await awaitable

    return await asyncio.gather(*(one(a) for a in awaitables))
