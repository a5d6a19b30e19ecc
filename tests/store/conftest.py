"""Fixtures for the store contract suite: every contract test runs once per backend.

Backends: ``sqlite`` (a file per test) and ``cosmos``: the local Cosmos server (``cosmos_local``, one process for the
whole test session, one database per test module), or the real account named by ``COSMOS_ENDPOINT`` (and
``COSMOS_KEY``, else ``DefaultAzureCredential``) when that variable is set. ``STORE_BACKENDS=sqlite`` (or ``cosmos``)
limits the run to one backend; Cosmos cases carry the ``cosmos`` marker (``-m "not cosmos"`` skips them too).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from session_store import ManualClock, SessionStore, SqliteSessionStore, StoreSettings


def pytest_configure(config: pytest.Config) -> None:
    # The local Cosmos server's certificate is self-signed; the SDK skips verification for 127.0.0.1 only.
    config.addinivalue_line("filterwarnings", "ignore::urllib3.exceptions.InsecureRequestWarning")


BACKENDS = [b for b in os.environ.get("STORE_BACKENDS", "sqlite,cosmos").split(",") if b]


@dataclass
class StoreHarness:
    """Opens stores of one backend and moves time for them (store clock and, locally, the server's TTL clock)."""

    backend: str
    open: Callable[..., SessionStore]
    clock: ManualClock
    advance_server_clock: Callable[[float], Awaitable[None]] | None
    real_account: bool = False

    async def expire(self, seconds: float) -> None:
        self.clock.advance(seconds)
        if self.advance_server_clock is not None:
            await self.advance_server_clock(seconds)


@pytest.fixture(scope="session")
def cosmos_account() -> Iterator[tuple[str, str | None, bool]]:
    """(endpoint, key, is_real_account): COSMOS_ENDPOINT when set, else a local server for the whole session."""
    endpoint = os.environ.get("COSMOS_ENDPOINT")
    if endpoint:
        yield endpoint, os.environ.get("COSMOS_KEY") or None, True
        return
    from cosmos_local import start_local_cosmos

    server = start_local_cosmos()
    try:
        yield server.endpoint, server.key, False
    finally:
        server.stop()


@pytest.fixture(scope="module")
def cosmos_database(request: pytest.FixtureRequest, cosmos_account: tuple[str, str | None, bool]) -> Iterator[str]:
    """One database per test module (the local server scans whole containers, so keep them small); dropped after."""
    name = f"t-{Path(request.node.name).stem.replace('_', '-')[:30]}-{uuid.uuid4().hex[:8]}"
    yield name
    from session_store.cosmos_admin import drop_database

    endpoint, key, _ = cosmos_account
    drop_database(endpoint, key, name)


@pytest.fixture(params=[pytest.param(b, marks=[pytest.mark.cosmos] if b == "cosmos" else []) for b in BACKENDS])
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreHarness]:
    clock = ManualClock()
    opened: list[SessionStore] = []
    if request.param == "sqlite":

        def open_sqlite(ttl_seconds: int | None = None) -> SessionStore:
            store = SqliteSessionStore(str(tmp_path / "sessions.sqlite3"), ttl_seconds=ttl_seconds, clock=clock)
            opened.append(store)
            return store

        h = StoreHarness("sqlite", open_sqlite, clock, None)
    else:
        endpoint, key, real = request.getfixturevalue("cosmos_account")
        database = request.getfixturevalue("cosmos_database")
        from session_store.cosmos_store import CosmosSessionStore

        def open_cosmos(ttl_seconds: int | None = None) -> SessionStore:
            settings = StoreSettings(
                COSMOS_ENDPOINT=endpoint, COSMOS_KEY=key, COSMOS_DATABASE=database, SESSION_TTL_SECONDS=ttl_seconds
            )
            store = CosmosSessionStore.open(settings, clock=clock)
            opened.append(store)
            return store

        advance = None
        if not real:
            from cosmos_local import advance_clock

            async def advance(seconds: float) -> None:
                advance_clock(endpoint, seconds)

        h = StoreHarness("cosmos", open_cosmos, clock, advance, real_account=real)
    try:
        yield h
    finally:
        for store in opened:
            await store.close()


@pytest.fixture
async def store(harness: StoreHarness) -> SessionStore:
    return harness.open()
