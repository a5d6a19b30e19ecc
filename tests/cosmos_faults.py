"""A `CosmosSessionStore`'s container refusing a write (a 503 from the real SDK's container, nothing written): shared by
the e2e and workflow tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


@contextmanager
def cosmos_writes_refused(store: Any, container: str, method: str = "create_item") -> Iterator[list[str]]:
    """Meanwhile a `CosmosSessionStore`'s `container` refuses `method` (a 503 from the real SDK's container, nothing
    written). Yields the ids of the items refused."""
    from azure.cosmos.exceptions import CosmosHttpResponseError

    proxy = store._db._c[container]
    refused: list[str] = []

    async def unavailable(first: Any, *args: Any, **kwargs: Any) -> Any:
        refused.append(str(first if isinstance(first, str) else first["id"]))  # an item's id, or the item
        raise CosmosHttpResponseError(status_code=503, message="Service Unavailable (injected)")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(proxy, method, unavailable)
        yield refused
