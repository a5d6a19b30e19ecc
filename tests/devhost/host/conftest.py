"""Fixtures of the host tests: the devhost pytest plugin's fixtures, pointed at the sample apps in tests/devhost/apps.

(`pytest_plugins` may only be declared in the root conftest, so the plugin's fixtures and hook are imported here.)
"""

import os
from pathlib import Path

import pytest

from devhost.pytest_plugin import (  # noqa: F401 - fixtures and the marker registration hook
    devhost,
    devhost_app_dir,
    devhost_client,
    devhost_env,
    devhost_factory,
    devhost_subprocess,
    pytest_configure,
)

APPS = Path(__file__).resolve().parent.parent / "apps"


@pytest.fixture
def apps_dir() -> Path:
    return APPS


@pytest.fixture(autouse=True)
def devhost_mode(monkeypatch: pytest.MonkeyPatch) -> str:
    """These tests check devhost's own calls (its worker pool, in-process streaming, its messages) unless
    DEVHOST_WORKER says otherwise; the real-worker mode has its own tests (test_real_worker.py: worker="runtime")."""
    mode = os.environ.get("DEVHOST_WORKER") or "inprocess"
    monkeypatch.setenv("DEVHOST_WORKER", mode)
    return mode
