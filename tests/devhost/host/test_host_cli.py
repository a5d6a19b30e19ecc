"""`python -m devhost`: startup output, load errors that name the file and function, exit codes."""

import subprocess
import sys
from pathlib import Path

import pytest

from devhost.testing import PACKAGE_ROOT, SubprocessHost, free_port

pytestmark = pytest.mark.devhost_app("tests/devhost/apps/http_durable")


def run_devhost(app_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "devhost", "--app-dir", str(app_dir), "--port", str(free_port()),
               "--state", ":memory:", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=PACKAGE_ROOT)


def write_app(tmp_path: Path, source: str) -> Path:
    (tmp_path / "function_app.py").write_text(source)
    return tmp_path


def test_import_error_names_the_file_and_line(tmp_path: Path) -> None:
    source = "import azure.functions as func\napp = func.FunctionApp()\nraise KeyError('SETTING')\n"
    app_dir = write_app(tmp_path, source)
    result = run_devhost(app_dir)
    assert result.returncode == 2
    assert f"{app_dir / 'function_app.py'}" in result.stderr
    assert "function_app.py:3" in result.stderr
    assert "KeyError" in result.stderr


DUPLICATE_NAME = (
    "import azure.functions as func\n"
    "app = func.FunctionApp()\n"
    "@app.route(route='a')\n"
    "def twice(req): return 'a'\n"
    "@app.function_name('twice')\n"
    "@app.route(route='b')\n"
    "def other(req): return 'b'\n"
)
BAD_ROUTE = (
    "import azure.functions as func\n"
    "app = func.FunctionApp()\n"
    "@app.route(route='items/{id:nosuch}')\n"
    "def broken(req): return 'x'\n"
)


@pytest.mark.parametrize(
    ("source", "expected"),
    [(DUPLICATE_NAME, ["twice", "function_app.py"]), (BAD_ROUTE, ["broken", "nosuch", "function_app.py"])],
    ids=["duplicate-function-name", "bad-route-constraint"],
)
def test_indexing_errors_name_the_function(tmp_path: Path, source: str, expected: list[str]) -> None:
    result = run_devhost(write_app(tmp_path, source))
    assert result.returncode == 2
    for text in expected:
        assert text in result.stderr


def test_missing_app_file(tmp_path: Path) -> None:
    result = run_devhost(tmp_path)
    assert result.returncode == 2
    assert "function_app.py: file not found" in result.stderr


def test_startup_prints_routes_and_triggers(devhost_subprocess) -> None:
    host: SubprocessHost = devhost_subprocess()
    output = host.output()
    assert f"start: [POST] {host.base_url}/api/orchestrators/{{name}}/{{instance_id?}}" in output
    assert "hello_sequence: orchestrationTrigger" in output
    assert "say_hello: activityTrigger" in output
    assert "Counter: entityTrigger" in output
    assert host.client.get("/admin/host/status").json() == {"state": "Running"}


def test_default_state_file_lives_in_the_app_dir(tmp_path: Path) -> None:
    app_dir = write_app(tmp_path, "import azure.functions as func\napp = func.FunctionApp()\n")
    port = free_port()
    command = [sys.executable, "-m", "devhost", "--app-dir", str(app_dir), "--port", str(port)]
    host = SubprocessHost(app_dir, state_path=tmp_path / "unused.sqlite3", port=port)
    host.command = lambda: command  # type: ignore[method-assign]
    with host:
        assert host.client.get("/admin/host/status").status_code == 200
    assert (app_dir / ".devhost" / "state.sqlite3").exists()


def test_port_in_use_is_a_clear_error(devhost_subprocess) -> None:
    running: SubprocessHost = devhost_subprocess()
    result = subprocess.run(
        [sys.executable, "-m", "devhost", "--app-dir", str(running.app_dir), "--port", str(running.port),
         "--state", ":memory:"],
        capture_output=True, text=True, timeout=60, cwd=PACKAGE_ROOT,
    )
    assert result.returncode == 3
    assert f"cannot listen on 127.0.0.1:{running.port}" in result.stderr
