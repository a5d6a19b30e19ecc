"""Cosmos `append_signal` when a write landed but its caller did not hear so: the azure-cosmos SDK retried the create
(and got 409 on its own item), or the answer was lost and the caller appended again. Either way the queue holds the
signal once, at the index it took. Against the real SDK and the local Cosmos server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from azure.core.exceptions import ServiceResponseError
from azure.cosmos.aio import ContainerProxy
from store_helpers import new_session

from session_store import SessionStore, StoreSettings, StoreUnavailableError, open_store

pytestmark = pytest.mark.cosmos


@pytest.fixture
async def store(cosmos_account: tuple[str, str | None, bool], cosmos_database: str) -> AsyncIterator[SessionStore]:
    endpoint, key, _ = cosmos_account
    opened = open_store(StoreSettings(COSMOS_ENDPOINT=endpoint, COSMOS_KEY=key, COSMOS_DATABASE=cosmos_database))
    yield opened
    await opened.close()


def landing_twice(monkeypatch: pytest.MonkeyPatch, then: type[Exception] | None) -> list[str]:
    """The next create of a signal item lands, then is sent again as the SDK's retry does (the server's 409 comes
    back), or (`then`) its answer is lost. Returns the ids of the signal items created that way."""
    create_item = ContainerProxy.create_item
    landed: list[str] = []

    async def create(self: ContainerProxy, body: dict[str, Any], **kwargs: Any) -> Any:
        if body.get("type") != "signal" or landed:
            return await create_item(self, body, **kwargs)
        await create_item(self, body, **kwargs)
        landed.append(body["id"])
        if then is not None:
            raise then("Connection aborted: the answer was lost")
        return await create_item(self, body, **kwargs)  # the retry: 409, the item is there

    monkeypatch.setattr(ContainerProxy, "create_item", create)
    return landed


async def test_an_sdk_retry_of_a_signal_write_that_landed_does_not_append_it_again(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = await new_session(store)
    landed = landing_twice(monkeypatch, then=None)
    signal = await store.append_signal(session_id, "approve", "sig-1", {"ok": True})
    assert landed == ["signal:approve:1"]
    assert (signal.index, signal.signal_id, signal.payload) == (1, "sig-1", {"ok": True})
    assert [(s.index, s.signal_id) for s in await store.list_signals(session_id, "approve")] == [(1, "sig-1")]
    assert (await store.append_signal(session_id, "approve", "sig-2", None)).index == 2


async def test_an_append_retried_after_its_answer_was_lost_returns_the_signal_it_appended(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = await new_session(store)
    landing_twice(monkeypatch, then=ServiceResponseError)
    with pytest.raises(StoreUnavailableError):
        await store.append_signal(session_id, "approve", "sig-1", {"ok": True})
    again = await store.append_signal(session_id, "approve", "sig-1", {"ok": True})
    assert (again.index, again.signal_id) == (1, "sig-1")
    assert [(s.index, s.signal_id) for s in await store.list_signals(session_id, "approve")] == [(1, "sig-1")]


async def test_a_signal_whose_write_never_landed_takes_the_next_free_index_on_retry(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its reservation names index 1, which another signal takes meanwhile: the retry moves on, no gap, no copy."""
    session_id = await new_session(store)
    create_item = ContainerProxy.create_item

    async def refused(self: ContainerProxy, body: dict[str, Any], **kwargs: Any) -> Any:
        if body.get("signal_id") == "sig-1" and body.get("type") == "signal":
            raise ServiceResponseError("Connection aborted before the request was sent")
        return await create_item(self, body, **kwargs)

    monkeypatch.setattr(ContainerProxy, "create_item", refused)
    with pytest.raises(StoreUnavailableError):
        await store.append_signal(session_id, "approve", "sig-1", {"ok": True})
    monkeypatch.undo()
    assert (await store.append_signal(session_id, "approve", "sig-2", None)).index == 1
    assert (await store.append_signal(session_id, "approve", "sig-1", {"ok": True})).index == 2
    assert (await store.append_signal(session_id, "approve", "sig-1", {"ok": True})).index == 2
    assert [(s.index, s.signal_id) for s in await store.list_signals(session_id, "approve")] == [
        (1, "sig-2"), (2, "sig-1"),
    ]
