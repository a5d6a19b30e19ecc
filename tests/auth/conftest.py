"""Fixtures of the identity tests: the real app on devhost in each `AUTH_MODE`, with callers to match.

`easyauth`: the headers App Service Authentication would send; `jwt`: bearer tokens from a local OpenID issuer on
loopback (`local_issuer.py`); `none`: the same people send principal headers, which the app must ignore.
Azure itself (the Easy Auth module in front of the app, Entra ID) is not here: its headers and tokens are made by
the tests, as documented by Microsoft.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

AUTH_DIR = Path(__file__).resolve().parent
E2E_DIR = AUTH_DIR.parent / "e2e"
for path in (str(AUTH_DIR), str(E2E_DIR)):  # the helpers imported below (the agents: `agents_on_path`)
    if path not in sys.path:
        sys.path.insert(0, path)

from auth_people import ALICE, AUTH_DIR, Callers, app_env, callers_for, easyauth_headers  # noqa: E402, F401
from e2e_harness import InProcessApp  # noqa: E402
from e2e_settings import importable, running_app  # noqa: E402
from local_issuer import LocalIssuer  # noqa: E402

from scripted_model import ScriptedModelServer  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    # The local Cosmos server's certificate is self-signed; the SDK skips verification for 127.0.0.1 only.
    config.addinivalue_line("filterwarnings", "ignore::urllib3.exceptions.InsecureRequestWarning")


@pytest.fixture(scope="session", autouse=True)
def agents_on_path() -> Iterator[None]:
    """`auth_agents` and `auth_workflows` import wherever the app runs (this process, child hosts, Azure's worker)."""
    with importable(AUTH_DIR):
        yield


@pytest.fixture(scope="session")
def model_server() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def model(model_server: ScriptedModelServer) -> ScriptedModelServer:
    model_server.reset()
    model_server.latency_ms = 0
    return model_server


@pytest.fixture(scope="session")
def issuer() -> Iterator[LocalIssuer]:
    server = LocalIssuer().start()
    yield server
    server.stop()


@pytest.fixture
def cosmos_settings(cosmos_account: tuple[str, str | None]) -> Iterator[dict[str, str]]:
    """A database of its own for the test (dropped after)."""
    endpoint, key = cosmos_account
    database = f"auth-{uuid.uuid4().hex[:12]}"
    yield {"COSMOS_ENDPOINT": endpoint, "COSMOS_DATABASE": database, **({"COSMOS_KEY": key} if key else {})}
    from session_store.cosmos_admin import drop_database

    drop_database(endpoint, key, database)


@pytest.fixture
def app_in(
    request: pytest.FixtureRequest, model_server: ScriptedModelServer, issuer: LocalIssuer
) -> Callable[..., AbstractContextManager[tuple[InProcessApp, Callers]]]:
    """`with app_in("jwt") as (app, callers):` - the app (in-process devhost, virtual clock) in that mode, on the
    SQLite store (`store="cosmos"`: on the local Cosmos server)."""

    from contextlib import contextmanager

    @contextmanager
    def start(mode: str, store: str = "sqlite", **settings: str) -> Iterator[tuple[InProcessApp, Callers]]:
        callers = callers_for(mode, issuer)
        env = app_env(model_server.base_url, **{**callers.settings, **settings})  # `settings` win (AUTH_MODE too)
        if store == "cosmos":
            env.pop("SESSION_STORE_PATH")
            env.update(request.getfixturevalue("cosmos_settings"))
        with running_app(env, store) as app:
            yield app, callers

    return start
