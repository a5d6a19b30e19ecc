"""A store write that lands and then fails (an error after the store took it, or its answer lost), injected into the
app's own store: the store method is called through, then raises."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from cosmos_faults import cosmos_writes_refused
from e2e_harness import InProcessApp


class AnswerLost(ConnectionError):
    """What the store's client raised after the store took the write."""


@contextmanager
def run_writes_lost(app: InProcessApp, *, read_fails: bool = False) -> Iterator[list[str]]:
    """Meanwhile the store's `begin_run` writes its run and then raises (and, `read_fails`, reads of runs, and the
    failed start's check of its run, `close_unwritten_start`, fail once one was written): yields the ids of the runs
    written that way."""
    store = app.services().current().store
    begin_run, get_run, close_unwritten_start = store.begin_run, store.get_run, store.close_unwritten_start
    written: list[str] = []

    async def written_then_lost(*args: Any, **kwargs: Any) -> Any:
        run = await begin_run(*args, **kwargs)
        written.append(run.run_id)
        raise AnswerLost("the store took the run; its answer was lost")

    async def unreadable_after_the_write(*args: Any, **kwargs: Any) -> Any:
        if written:
            raise AnswerLost("the store is unreachable")
        return await get_run(*args, **kwargs)

    async def unchecked_after_the_write(*args: Any, **kwargs: Any) -> Any:
        if written:
            raise AnswerLost("the store is unreachable")
        return await close_unwritten_start(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "begin_run", written_then_lost)
        if read_fails:
            patch.setattr(store, "get_run", unreadable_after_the_write)
            patch.setattr(store, "close_unwritten_start", unchecked_after_the_write)
        yield written


@contextmanager
def run_writes_late(app: InProcessApp) -> Iterator[list[Callable[[], Awaitable[Any]]]]:
    """Meanwhile the store's `begin_run` raises at once, its write still on its way (slower than its error: a timed
    out request the store applies later, a client's retry): yields, for each, the write landing (call it after the
    request has answered; on the host's loop, `app.store_call`)."""
    store = app.services().current().store
    begin_run = store.begin_run
    on_their_way: list[Callable[[], Awaitable[Any]]] = []

    async def slower_than_its_error(*args: Any, **kwargs: Any) -> Any:
        on_their_way.append(lambda: begin_run(*args, **kwargs))
        raise AnswerLost("timed out; the write is still on its way")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "begin_run", slower_than_its_error)
        yield on_their_way


@contextmanager
def run_items_refused(app: InProcessApp) -> Iterator[list[str]]:
    """Cosmos only: meanwhile the app's store cannot create run items, so a `begin_run` whose claim of the session
    landed (its own write, in the `sessions` container) fails at its run's write - and so does the record closing the
    start in the run's place (`close_unwritten_start`): the claim stays. Yields the ids of the runs refused, once
    each."""
    refused: list[str] = []
    with cosmos_writes_refused(app.services().current().store, "runs") as attempts:
        yield refused
        refused.extend(dict.fromkeys(attempts))


@contextmanager
def run_items_late(app: InProcessApp) -> Iterator[list[Callable[[], Awaitable[Any]]]]:
    """Cosmos only: meanwhile a run item's create (not a closed start's record) fails after the claim of the session
    landed, its write still on its way: yields, for each, that create landing (call it after the request answered;
    `app.store_call`). What it answers: the item created, or None when an item of that id was there first."""
    store = app.services().current().store
    runs = store._db._c["runs"]
    create_item = runs.create_item
    on_their_way: list[Callable[[], Awaitable[Any]]] = []

    async def slower_than_its_error(body: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if body.get("status") == "failed":
            return await create_item(body, *args, **kwargs)
        on_their_way.append(lambda: store._portal.call(store._db.create("runs", body)))
        raise AnswerLost("timed out; the write is still on its way")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runs, "create_item", slower_than_its_error)
        yield on_their_way
