"""Fixtures of the host tests: the devhost pytest plugin, pointed at the sample apps in tests/devhost/apps."""

from pathlib import Path

import pytest

pytest_plugins = ["devhost.pytest_plugin"]

APPS = Path(__file__).resolve().parent.parent / "apps"


@pytest.fixture
def apps_dir() -> Path:
    return APPS
