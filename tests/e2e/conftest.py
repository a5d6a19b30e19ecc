"""Fixtures of the end-to-end suite: the real app (`function_app.py` at the repository root) on devhost, its
`openai` client pointed at a scripted model server this process runs, and the test agents of `fixture_agents`.

Store backends: ``sqlite`` (in memory) and ``cosmos`` (the local Cosmos server started once per test session, or
the account named by ``COSMOS_ENDPOINT``/``COSMOS_KEY``). ``E2E_STORES=sqlite`` limits the run to one backend; the
Cosmos cases carry the ``cosmos`` marker (``-m "not cosmos"`` skips them too).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from e2e_harness import InProcessApp
from e2e_settings import E2E_DIR, app_settings, importable, running_app

from scripted_model import ScriptedModelServer

STORE_BACKENDS = [b for b in os.environ.get("E2E_STORES", "sqlite,cosmos").split(",") if b]


def pytest_configure(config: pytest.Config) -> None:
    # The local Cosmos server's certificate is self-signed; the SDK skips verification for 127.0.0.1 only.
    config.addinivalue_line("filterwarnings", "ignore::urllib3.exceptions.InsecureRequestWarning")


@pytest.fixture(scope="session", autouse=True)
def fixture_agents_on_path() -> Iterator[None]:
    """`fixture_agents` (and the other agent packages here) import wherever the app runs."""
    with importable(E2E_DIR):
        yield


@pytest.fixture(scope="session")
def model_server() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def model(model_server: ScriptedModelServer) -> ScriptedModelServer:
    """The scripted model, blank for this test: set its script with `model.set_script(...)`."""
    model_server.reset()
    model_server.latency_ms = 0
    return model_server


@pytest.fixture(scope="module")
def cosmos_settings(request: pytest.FixtureRequest, cosmos_account: tuple[str, str | None]) -> Iterator[dict[str, str]]:
    """A database of its own for each test module (the local server scans whole containers: keep them small)."""
    endpoint, key = cosmos_account
    database = f"e2e-{Path(str(request.node.name)).stem.replace('_', '-')[:30]}-{uuid.uuid4().hex[:8]}"
    yield {"COSMOS_ENDPOINT": endpoint, "COSMOS_DATABASE": database, **({"COSMOS_KEY": key} if key else {})}
    from session_store.cosmos_admin import drop_database

    drop_database(endpoint, key, database)


def store_params() -> list[object]:
    return [pytest.param(b, marks=[pytest.mark.cosmos] if b == "cosmos" else [], id=b) for b in STORE_BACKENDS]


@pytest.fixture(params=store_params())
def store_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def marker_dir(tmp_path: Path) -> Path:
    """Where `slow_step` drops its markers and waits for its release file."""
    path = tmp_path / "markers"
    path.mkdir()
    return path


@pytest.fixture
def store_settings(request: pytest.FixtureRequest, store_backend: str, marker_dir: Path,
                   tmp_path: Path) -> dict[str, str]:
    markers = {"E2E_MARKER_DIR": str(marker_dir)}
    if store_backend == "cosmos":
        return {**request.getfixturevalue("cosmos_settings"), **markers}
    return {"SESSION_STORE_PATH": ":memory:", **markers}  # a file through the real worker (running_app)


@pytest.fixture
def app(
    model_server: ScriptedModelServer, store_backend: str, store_settings: dict[str, str]
) -> Iterator[InProcessApp]:
    """The app on an in-process devhost with the virtual clock, on the chosen store."""
    with running_app(app_settings(model_server.base_url, **store_settings), store_backend) as started:
        yield started


@pytest.fixture
def app_with(
    model_server: ScriptedModelServer, store_backend: str, store_settings: dict[str, str]
) -> Iterator[Callable[..., AbstractContextManager[InProcessApp]]]:
    """`with app_with(SETTING="value") as app:` - the app with extra settings, on the chosen store."""

    def start(**settings: str) -> AbstractContextManager[InProcessApp]:
        return running_app(app_settings(model_server.base_url, **store_settings, **settings), store_backend)

    yield start


