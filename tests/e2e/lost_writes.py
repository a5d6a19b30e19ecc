"""A store write that lands and then fails (an error after the store took it, or its answer lost), injected into the
app's own store: the store method is called through, then raises."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from cosmos_faults import cosmos_writes_refused
from e2e_harness import InProcessApp


class AnswerLost(ConnectionError):
    """What the store's client raised after the store took the write."""


@contextmanager
def run_writes_lost(app: InProcessApp, *, read_fails: bool = False) -> Iterator[list[str]]:
    """Meanwhile the store's `begin_run` writes its run and then raises (and, `read_fails`, reads of runs fail once
    one was written): yields the ids of the runs written that way."""
    store = app.services().current().store
    begin_run, get_run = store.begin_run, store.get_run
    written: list[str] = []

    async def written_then_lost(*args: Any, **kwargs: Any) -> Any:
        run = await begin_run(*args, **kwargs)
        written.append(run.run_id)
        raise AnswerLost("the store took the run; its answer was lost")

    async def unreadable_after_the_write(*args: Any, **kwargs: Any) -> Any:
        if written:
            raise AnswerLost("the store is unreachable")
        return await get_run(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "begin_run", written_then_lost)
        if read_fails:
            patch.setattr(store, "get_run", unreadable_after_the_write)
        yield written


@contextmanager
def run_items_refused(app: InProcessApp) -> Iterator[list[str]]:
    """Cosmos only: meanwhile the app's store cannot create run items, so a `begin_run` whose claim of the session
    landed (its own write, in the `sessions` container) fails at its run's write. Yields the ids of the runs refused."""
    with cosmos_writes_refused(app.services().current().store, "runs") as refused:
        yield refused
