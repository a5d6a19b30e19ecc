"""Shared pytest configuration. Per-area fixtures live next to their tests; the local Cosmos server is shared."""

import os
from collections.abc import Iterator

import pytest

# host.json names its task hub `%TASKHUB_NAME%` (an app setting, as on Azure): every host of the app that a test or
# its child processes start gets one, as a developer's local.settings.json would give it.
os.environ.setdefault("TASKHUB_NAME", "tests")


@pytest.fixture(scope="session")
def cosmos_account() -> Iterator[tuple[str, str | None]]:
    """(endpoint, key): COSMOS_ENDPOINT when set, else one local Cosmos server for the whole test session (every
    directory that needs one shares it; each test module uses a database of its own)."""
    endpoint = os.environ.get("COSMOS_ENDPOINT")
    if endpoint:
        yield endpoint, os.environ.get("COSMOS_KEY") or None
        return
    from cosmos_local import start_local_cosmos

    server = start_local_cosmos()
    try:
        yield server.endpoint, server.key
    finally:
        server.stop()
