"""Shared pytest configuration. Per-area fixtures live next to their tests; the local Cosmos server is shared."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from listeners import FETCHED_MARKER, RecordingServer, SilentServer

from devhost.protocol import replay

# host.json names its task hub `%TASKHUB_NAME%` (an app setting, as on Azure): every host of the app that a test or
# its child processes start gets one, as a developer's local.settings.json would give it.
os.environ.setdefault("TASKHUB_NAME", "tests")


@pytest.fixture(autouse=True)
def verify_continued_replays(monkeypatch: pytest.MonkeyPatch) -> None:
    """devhost continues each execution's replay from the previous episode: in tests (hosts in this process), every
    continued replay is also done from scratch and must give the same decisions and completion."""
    monkeypatch.setattr(replay, "VERIFY_CONTINUED_REPLAY", True)


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


@pytest.fixture
def recording() -> Iterator[RecordingServer]:
    """An HTTP server on 127.0.0.1 that records every request (`listeners.py`)."""
    with RecordingServer() as server:
        yield server


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    """A server on 127.0.0.1 that accepts connections and never answers (`listeners.py`)."""
    with SilentServer() as server:
        yield server


@pytest.fixture
def local_file(tmp_path: Path) -> str:
    """A `file:` URL of a real schema document that must never be read."""
    path = tmp_path / "secret-schema.json"
    path.write_text(f'{{"type": "string", "const": "{FETCHED_MARKER}"}}')
    return path.as_uri()
