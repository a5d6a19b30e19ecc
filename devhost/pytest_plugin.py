"""pytest fixtures for apps served by devhost. Enable with `pytest_plugins = ["devhost.pytest_plugin"]`.

Fixtures (all function-scoped; every host is stopped, and the environment restored, at teardown):

* `devhost_app_dir` -> Path: the app under test. Default: the `@pytest.mark.devhost_app("dir")` marker argument
  (relative to the pytest rootdir), else the rootdir itself. Override it in a conftest.py to pin another app.
* `devhost_env` -> dict[str, str]: variables set before the app is imported (they win over local.settings.json).
  Default `{}`; override it (e.g. to point OPENAI_BASE_URL at a fake server).
* `devhost` -> InProcessHost: the app in-process on a free port, virtual clock ("virtual"; the marker's
  `clock="auto-skip"|"real"` keyword changes it), in-memory state.
* `devhost_client` -> httpx.Client bound to `devhost.base_url`.
* `devhost_factory(app_dir=None, **kwargs) -> InProcessHost`: more hosts / other options (kwargs of InProcessHost).
* `devhost_subprocess(app_dir=None, *, state_path=None, **kwargs) -> SubprocessHost`: `python -m devhost` in a child
  process; state file defaults to `tmp_path/"devhost-state.sqlite3"`; `kill()` + `start()` to crash and resume;
  `clock="virtual"` lets the test move time with `advance()` (over `POST /admin/devhost/advance`).

Example:

    pytestmark = pytest.mark.devhost_app("tests/apps/my_app")

    def test_approval_times_out(devhost, devhost_client):
        run_id = devhost_client.post("/api/runs", json={...}).json()["id"]
        devhost.wait_for_status(run_id, "Running")
        devhost.advance(3 * 86400)                      # the 3-day approval timer fires
        assert devhost.wait_for_status(run_id)["output"]["status"] == "timed_out"
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from devhost.testing import InProcessHost, SubprocessHost


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "devhost_app(app_dir, clock=...): the app (and clock mode) the devhost fixtures serve"
    )


def _marker(request: pytest.FixtureRequest) -> pytest.Mark | None:
    return request.node.get_closest_marker("devhost_app")


@pytest.fixture
def devhost_app_dir(request: pytest.FixtureRequest) -> Path:
    root = Path(request.config.rootpath)
    marker = _marker(request)
    if marker is not None and marker.args:
        return (root / marker.args[0]).resolve()
    return root


@pytest.fixture
def devhost_env() -> dict[str, str]:
    return {}


@pytest.fixture
def devhost_factory(devhost_app_dir: Path, devhost_env: dict[str, str]) -> Iterator[Callable[..., InProcessHost]]:
    started: list[InProcessHost] = []

    def start(app_dir: str | Path | None = None, **kwargs: Any) -> InProcessHost:
        kwargs.setdefault("env", devhost_env)
        host = InProcessHost(app_dir or devhost_app_dir, **kwargs).start()
        started.append(host)
        return host

    yield start
    for host in reversed(started):
        host.stop()


@pytest.fixture
def devhost(request: pytest.FixtureRequest, devhost_factory: Callable[..., InProcessHost]) -> InProcessHost:
    marker = _marker(request)
    clock = marker.kwargs.get("clock", "virtual") if marker is not None else "virtual"
    return devhost_factory(clock=clock)


@pytest.fixture
def devhost_client(devhost: InProcessHost) -> httpx.Client:
    return devhost.client


@pytest.fixture
def devhost_subprocess(
    devhost_app_dir: Path, devhost_env: dict[str, str], tmp_path: Path
) -> Iterator[Callable[..., SubprocessHost]]:
    started: list[SubprocessHost] = []

    def start(
        app_dir: str | Path | None = None, *, state_path: str | Path | None = None, **kwargs: Any
    ) -> SubprocessHost:
        kwargs.setdefault("env", devhost_env)
        host = SubprocessHost(
            app_dir or devhost_app_dir, state_path=state_path or tmp_path / "devhost-state.sqlite3", **kwargs
        )
        started.append(host)
        return host.start()

    yield start
    for host in reversed(started):
        host.close()
