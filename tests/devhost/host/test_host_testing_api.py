"""The testing API itself: virtual time through the fixtures, waiting helpers, the plugin in a fresh project."""

import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from devhost.testing import PACKAGE_ROOT, InProcessHost

pytestmark = pytest.mark.devhost_app("tests/devhost/apps/http_durable")


def start(client: httpx.Client, name: str, **kwargs) -> str:
    response = client.post(f"/api/orchestrators/{name}", **kwargs)
    assert response.status_code == 202, response.text
    return response.json()["id"]


def test_virtual_clock_moves_only_when_advanced(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    instance_id = start(devhost_client, "wait_timer", json={"hours": 72})
    devhost.wait_until_idle()
    assert devhost.get_status(instance_id)["runtimeStatus"] == "Running"
    devhost.advance(71 * 3600)
    assert devhost.get_status(instance_id)["runtimeStatus"] == "Running"
    devhost.advance(3600)
    assert devhost.get_status(instance_id)["output"] == "timer fired"


def test_wait_until_idle_can_skip_timers(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    instance_id = start(devhost_client, "wait_timer", json={"hours": 24 * 9})  # long timer, chunked by the engine
    devhost.wait_until_idle(skip_timers=True)
    assert devhost.get_status(instance_id)["output"] == "timer fired"


@pytest.mark.devhost_app("tests/devhost/apps/http_durable", clock="auto-skip")
def test_auto_skip_clock_from_the_marker(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    instance_id = start(devhost_client, "wait_timer", json={"hours": 5})
    assert devhost.wait_for_status(instance_id)["output"] == "timer fired"


def test_wait_for_status_times_out(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    instance_id = start(devhost_client, "wait_event")
    assert devhost.wait_for_status(instance_id, "Running")["customStatus"] == "waiting"
    with pytest.raises(TimeoutError):
        devhost.wait_for_status(instance_id, timeout=0.2)


def test_engine_calls_run_on_the_host_loop(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    instance_id = devhost.run(devhost.engine.start_new("echo_input", None, '{"direct": 1}'))
    assert devhost.wait_for_status(instance_id)["output"] == {"direct": 1}
    # Start and stop again in the same test process: a second host gets a fresh SDK client session.
    assert devhost_client.post("/api/start-and-wait/echo_input", json={"x": 1}).json() == {"x": 1}


def test_two_hosts_side_by_side(devhost_factory, apps_dir: Path) -> None:
    first: InProcessHost = devhost_factory(apps_dir / "http_durable")
    second: InProcessHost = devhost_factory(apps_dir / "http_basic")
    assert first.base_url != second.base_url
    assert second.client.get("/api/hello").text == "hello world"
    assert first.client.post("/api/start-and-wait/echo_input", json={"a": 1}).json() == {"a": 1}


def test_plugin_in_a_fresh_project(tmp_path: Path, apps_dir: Path) -> None:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["devhost.pytest_plugin"]\n')
    app = apps_dir / "http_durable"
    (tmp_path / "test_app.py").write_text(textwrap.dedent(f"""
        import pytest

        @pytest.fixture
        def devhost_app_dir():
            return {str(app)!r}

        @pytest.fixture
        def devhost_env():
            return {{"FRESH_PROJECT_SETTING": "1"}}

        def test_runs(devhost, devhost_client):
            import os
            assert os.environ["FRESH_PROJECT_SETTING"] == "1"
            r = devhost_client.post("/api/orchestrators/echo_input", json={{"ok": True}})
            assert devhost.wait_for_status(r.json()["id"])["output"] == {{"ok": True}}
    """))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": PACKAGE_ROOT},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_each_host_imports_the_app_under_its_own_environment(devhost_factory, apps_dir: Path) -> None:
    app = apps_dir / "http_settings"
    first: InProcessHost = devhost_factory(app)
    assert first.client.get("/api/greeting").text == "from local.settings.json"
    first.stop()
    second: InProcessHost = devhost_factory(app, env={"SETTINGS_APP_GREETING": "from the test"})
    assert second.client.get("/api/greeting").text == "from the test"
    second.stop()
    import sys

    assert "app_settings" not in sys.modules


def test_the_admin_endpoints_refuse_numbers_that_are_not_finite_with_400(devhost_client: httpx.Client) -> None:
    """NaN and infinity: 400, not a 500 (timedelta refuses them) nor a NaN loop timer (run_until_idle's wait)."""
    for seconds in ("nan", "inf", "1e300"):
        assert devhost_client.post("/admin/devhost/advance", params={"seconds": seconds}).status_code == 400
    assert devhost_client.post("/admin/devhost/idle", params={"timeout": "nan"}).status_code == 400
    assert devhost_client.post("/admin/devhost/advance", params={"seconds": "60"}).status_code == 200
