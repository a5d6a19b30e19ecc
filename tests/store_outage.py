"""The session store down for a while (a regional Cosmos outage, throttling for minutes): every call of the app's
store object - or only those named - raises what the store raises for a 503, until the outage ends. Store-agnostic
(it replaces the store object's methods), so it serves SQLite and Cosmos runs alike; the app must run in the test's
process."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from session_store import StoreUnavailableError


def outage() -> Exception:
    return StoreUnavailableError("Cosmos DB request failed: HTTP 503 (injected outage)")


def bug() -> Exception:
    """Not an outage: what a defect raises, alike on every try."""
    return TypeError("'NoneType' object is not subscriptable (injected bug)")


@contextlib.contextmanager
def store_down(
    store: Any, *only: str, failure: Callable[[], Exception] = outage, when: Callable[..., bool] | None = None
) -> Iterator[list[str]]:
    """While open, the store's coroutine methods (or `only` these) fail with `failure()` - or only the calls whose
    arguments `when` accepts (the others go through); yields the names of the calls refused."""
    refused: list[str] = []
    names = only or [name for name, member in inspect.getmembers(type(store))
                     if not name.startswith("_") and inspect.iscoroutinefunction(member)]
    with pytest.MonkeyPatch.context() as patch:
        for name in names:
            up = getattr(store, name)

            async def down(*args: Any, _name: str = name, _up: Any = up, **kwargs: Any) -> Any:
                if when is not None and not when(*args, **kwargs):
                    return await _up(*args, **kwargs)
                refused.append(_name)
                raise failure()

            patch.setattr(store, name, down)
        yield refused
