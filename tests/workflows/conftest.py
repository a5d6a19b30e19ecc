"""Fixtures for workflow tests: the scripted model server (the app's real openai client talks to it) and the app
on devhost (`InProcessHost`, virtual clock, in-memory store), serving the shipped workflows plus the test-only ones
in `wf_fixtures` (signals, failures, an eternal monitor, a cancellable child)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from workflow_scripts import app_env, standard_script, workflow_host

from devhost.testing import InProcessHost
from scripted_model.server import ScriptedModelServer


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer(standard_script())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def host(model: ScriptedModelServer) -> Iterator[InProcessHost]:
    with workflow_host(app_env(model)) as app:
        yield app


@pytest.fixture
def notifying_host(model: ScriptedModelServer) -> Iterator[InProcessHost]:
    """The app on devhost with webhook notifications configured (no receiver: the recording of events is tested)."""
    webhooks = {"WEBHOOK_URLS": "https://hooks.example.com/agents", "WEBHOOK_SECRET": "whsec_" + "QUJD" * 8}
    with workflow_host(app_env(model, **webhooks)) as app:
        yield app


@pytest.fixture
def cosmos_host(model: ScriptedModelServer, cosmos_account: tuple[str, str | None]) -> Iterator[InProcessHost]:
    """The app on devhost with the Cosmos store (a database of its own, dropped after)."""
    endpoint, key = cosmos_account
    database = f"wf-{uuid.uuid4().hex[:12]}"
    cosmos = {"COSMOS_ENDPOINT": endpoint, "COSMOS_DATABASE": database, **({"COSMOS_KEY": key} if key else {})}
    env = {k: v for k, v in app_env(model, **cosmos).items() if k != "SESSION_STORE_PATH"}
    try:
        with workflow_host(env) as app:
            yield app
    finally:
        from session_store.cosmos_admin import drop_database

        drop_database(endpoint, key, database)
