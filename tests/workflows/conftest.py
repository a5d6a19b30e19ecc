"""Fixtures for workflow tests: the scripted model server (the app's real openai client talks to it) and the app
on devhost (`InProcessHost`, virtual clock, in-memory store), serving the shipped workflows plus the test-only ones
in `wf_fixtures` (signals, failures, an eternal monitor, a cancellable child)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator

import pytest
from app_services import start_app_host
from workflow_scripts import FIXTURES_DIR, REPO_ROOT, TEST_WORKFLOWS_PACKAGE, standard_script, stop_host

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


def app_env(model: ScriptedModelServer, **extra: str) -> dict[str, str]:
    return {
        "SCRIPTED_MODEL_URL": str(model.base_url),
        "SESSION_STORE_PATH": ":memory:",
        "WORKFLOWS_PACKAGE": TEST_WORKFLOWS_PACKAGE,
        "CONTINUATION_TOKEN_SECRET": "workflow-tests-secret",
        "MODEL_RETRY_MAX_ATTEMPTS": "1",
        **extra,
    }


@pytest.fixture
def host(model: ScriptedModelServer) -> Iterator[InProcessHost]:
    if str(FIXTURES_DIR) not in sys.path:
        sys.path.insert(0, str(FIXTURES_DIR))
    app = start_app_host(REPO_ROOT, clock="virtual", env=app_env(model))
    try:
        yield app
    finally:
        stop_host(app)


@pytest.fixture
def notifying_host(model: ScriptedModelServer) -> Iterator[InProcessHost]:
    """The app on devhost with webhook notifications configured (no receiver: the recording of events is tested)."""
    if str(FIXTURES_DIR) not in sys.path:
        sys.path.insert(0, str(FIXTURES_DIR))
    webhooks = {"WEBHOOK_URLS": "https://hooks.example.com/agents", "WEBHOOK_SECRET": "whsec_" + "QUJD" * 8}
    app = start_app_host(REPO_ROOT, clock="virtual", env=app_env(model, **webhooks))
    try:
        yield app
    finally:
        stop_host(app)


@pytest.fixture
def cosmos_host(model: ScriptedModelServer, cosmos_account: tuple[str, str | None]) -> Iterator[InProcessHost]:
    """The app on devhost with the Cosmos store (a database of its own, dropped after)."""
    if str(FIXTURES_DIR) not in sys.path:
        sys.path.insert(0, str(FIXTURES_DIR))
    endpoint, key = cosmos_account
    database = f"wf-{uuid.uuid4().hex[:12]}"
    cosmos = {"COSMOS_ENDPOINT": endpoint, "COSMOS_DATABASE": database, **({"COSMOS_KEY": key} if key else {})}
    env = {k: v for k, v in app_env(model, **cosmos).items() if k != "SESSION_STORE_PATH"}
    app = start_app_host(REPO_ROOT, clock="virtual", env=env)
    try:
        yield app
    finally:
        stop_host(app)
        from session_store.cosmos_admin import drop_database

        drop_database(endpoint, key, database)
