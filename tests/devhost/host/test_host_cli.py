"""`python -m devhost`: startup output, load errors that name the file and function, exit codes."""

import json
import os
import shlex
import subprocess
import sys
import time
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


def test_startup_prints_a_short_banner_and_every_function_on_request(devhost_subprocess) -> None:
    """The banner's `--list-functions` command, run as shown (this interpreter, the host's directory) while the host
    serves: it lists every function and exits, serving nothing (it once started a second host: port in use)."""
    host: SubprocessHost = devhost_subprocess()
    banner = host.output()
    assert f"POST {host.base_url}/api/orchestrators/{{name}}/{{instance_id?}}" in banner  # a few routes, counted
    assert "HTTP routes in all" in banner
    assert "hello_sequence: orchestrationTrigger" not in banner
    listing = banner.split("Every function: ")[1].split(". Stop: Ctrl-C.")[0]
    assert listing == f"{sys.executable} -m devhost --port {host.port} --list-functions"

    env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)}
    listed = subprocess.run(shlex.split(listing), capture_output=True, text=True, timeout=60, cwd=host.app_dir,
                            env=env)
    assert listed.returncode == 0, listed.stderr
    output = listed.stdout
    assert f"start: [POST] {host.base_url}/api/orchestrators/{{name}}/{{instance_id?}}" in output
    assert "hello_sequence: orchestrationTrigger" in output
    assert "say_hello: activityTrigger" in output
    assert "Counter: entityTrigger" in output
    assert "serving" not in output
    status = host.client.get("/admin/host/status").json()  # the serving host is untouched
    assert status["state"] == "Running" and status["durable"]["engine"] == "devhost"


def test_list_functions_names_the_projects_interpreter_and_the_app_dir_when_elsewhere(tmp_path: Path) -> None:
    """Run from the project directory with its environment's python, the banner shows `.venv/bin/python` (plain
    `python` outside the environment cannot import devhost)."""
    from devhost.cli import list_command

    venv_python = tmp_path / ".venv" / "bin" / "python"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        patch.setattr(sys, "executable", str(venv_python))
        assert list_command(tmp_path.resolve(), 7071) == ".venv/bin/python -m devhost --list-functions"
        elsewhere = tmp_path / "app"
        assert list_command(elsewhere, 8080) == \
            f".venv/bin/python -m devhost --app-dir {elsewhere} --port 8080 --list-functions"


def test_list_functions_reports_a_broken_app_and_serves_nothing(tmp_path: Path) -> None:
    app_dir = write_app(tmp_path, "import azure.functions as func\napp = func.FunctionApp()\nraise KeyError('X')\n")
    result = run_devhost(app_dir, "--list-functions")
    assert result.returncode == 2 and "function_app.py:3" in result.stderr
    assert not (app_dir / ".devhost").exists()


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


def test_this_app_alone_tells_a_newcomer_what_to_try_and_needs_no_task_hub_setting(tmp_path: Path) -> None:
    """`python -m devhost` in this repository with nothing set: host.json names its task hub `%TASKHUB_NAME%` (as on
    Azure), which gets a local name; the banner shows the page, a first curl and the agentctl command."""
    env = {k: v for k, v in os.environ.items() if k != "TASKHUB_NAME"}
    port = free_port()
    log = tmp_path / "devhost.log"
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "devhost", "--port", str(port), "--state", ":memory:"],
                                   stdout=out, stderr=subprocess.STDOUT, cwd=PACKAGE_ROOT, env=env)
    try:
        deadline = time.monotonic() + 120
        while "Every function:" not in log.read_text() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # waiting for the child's output (no clock involved)
        output = log.read_text()
        base = f"http://127.0.0.1:{port}"
        assert "devhost: TASKHUB_NAME is not set: using the task hub name 'local'" in output
        assert f"The page (approvals inbox, chat, runs):  {base}/api/ui" in output
        first_run = next(line for line in output.splitlines() if "A first run:" in line).split("A first run:")[1]
        answer = subprocess.run(shlex.split(first_run.strip()), capture_output=True, text=True, timeout=60)
        assert json.loads(answer.stdout)["status"] == "completed"
        assert f'agentctl --url {base} run assistant "Email bob@example.com that the report is ready"' in output
        assert "hello_sequence" not in output and "agent_run: orchestrationTrigger" not in output
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_workers_help_says_every_function_runs_in_the_workers(capsys: pytest.CaptureFixture[str]) -> None:
    """`--workers N` runs orchestrator episodes and entity batches in the workers too (devhost/workers/pool.py;
    docs/devhost.md): its help must not send a reader looking for them in the host process."""
    from devhost.cli import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--help"])
    options = " ".join(capsys.readouterr().out.split()).split("options:")[1]
    workers = options[options.index("--workers N"):options.index("--list-functions ")]
    assert "orchestrator" in workers and "entity batches" in workers, workers
    assert "always run in the host" not in workers, workers
