"""``open_store``: the one place that picks the backend from the settings."""

from __future__ import annotations

from .clock import Clock, system_clock
from .protocol import SessionStore
from .settings import StoreSettings
from .sqlite_store import SqliteSessionStore


def open_store(settings: StoreSettings | None = None, *, clock: Clock = system_clock) -> SessionStore:
    """Open the configured store: Cosmos DB when ``COSMOS_ENDPOINT`` is set, else SQLite at ``SESSION_STORE_PATH``.

    Synchronous on purpose (call it once per process at start-up, e.g. lazily from the first activity): the Cosmos
    store creates its database and containers here and raises ``StoreUnavailableError`` if the account refuses.
    """
    settings = settings or StoreSettings()
    if settings.uses_cosmos:
        from .cosmos_store import CosmosSessionStore  # imported lazily: SQLite-only deployments never load the SDK

        return CosmosSessionStore.open(settings, clock=clock)
    return SqliteSessionStore(
        settings.session_store_path, ttl_seconds=settings.session_ttl_seconds, clock=clock,
        inline=settings.session_store_inline,
    )
