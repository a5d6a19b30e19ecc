"""The deployment package (`make package` -> dist/functionapp.zip), served from a clean directory the way Azure
would: unpacked away from the repository, its `requirements.txt` (the hash-checked lock) installed into fresh
virtual environments for Python 3.11, 3.12 and 3.13, and run on devhost with production-like settings: Cosmos DB
(the local server, with a key), an OpenAI-compatible model URL (our scripted server running the demo brain), a real
token secret and `WEBSITE_INSTANCE_ID` set so the production guards are live. The agent tour passes on each: a run
that calls a tool needing approval, the approval, polling with continuation tokens to completion.

What is not here is Azure itself: devhost stands in for the Functions host (it is not in the package; only the
`devhost` folder is put on the interpreter's path, so the app can import nothing from the repository).
"""

from __future__ import annotations

import glob
import secrets
import shutil
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from deploy.package import build
from devhost.testing import SubprocessHost
from scripted_model import ScriptedModelServer
from scripted_model.demo import start_demo_server

pytestmark = [pytest.mark.slow, pytest.mark.cosmos, pytest.mark.timeout(600)]

REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHONS = ("3.11", "3.12", "3.13")
NOT_SHIPPED = ("tests/", "bench/", "devhost/", "cosmos_local/", "deploy/", "infra/", "node_modules", ".venv",
               "local.settings", "dist/", ".devhost/", "__pycache__", "requirements-dev.txt", "package.json")


def interpreter(version: str) -> str | None:
    """`pythonX.Y` from PYTHONX_Y-style locations: pyenv's versions first (its shims may point elsewhere), then PATH."""
    candidates = sorted(glob.glob(str(Path.home() / f".pyenv/versions/{version}.*/bin/python")), reverse=True)
    found = shutil.which(f"python{version}")
    for candidate in [*candidates, *([found] if found else [])]:
        probe = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return candidate
    return None


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(REPO_ROOT, tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def unpacked(package: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    app_dir = tmp_path_factory.mktemp("wwwroot")
    with zipfile.ZipFile(package) as zipped:
        zipped.extractall(app_dir)
    return app_dir


@pytest.fixture(scope="module")
def devhost_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding only the `devhost` package: the host's code on the path, nothing of the app's."""
    path = tmp_path_factory.mktemp("hostpath")
    shutil.copytree(REPO_ROOT / "devhost", path / "devhost", ignore=shutil.ignore_patterns("__pycache__"))
    return path


@pytest.fixture(scope="module")
def cosmos() -> Iterator[tuple[str, str]]:
    from cosmos_local import start_local_cosmos

    server = start_local_cosmos()
    try:
        yield server.endpoint, server.key
    finally:
        server.stop()


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    server = start_demo_server()
    try:
        yield server
    finally:
        server.stop()


def test_the_package_ships_the_app_and_nothing_else(package: Path) -> None:
    with zipfile.ZipFile(package) as zipped:
        names = zipped.namelist()
        requirements = zipped.read("requirements.txt").decode()
    assert {"function_app.py", "host.json", "requirements.txt"} <= set(names)
    assert {name.split("/")[0] for name in names if "/" in name} >= {"agent_runs", "agent_runtime", "served_agents",
                                                                     "http_api", "session_store", "orchestrators"}
    shipped_wrongly = [name for name in names for part in NOT_SHIPPED if part in name]
    hidden = [name for name in names if any(part.startswith(".") for part in name.split("/"))]
    assert (shipped_wrongly, hidden) == ([], [])
    assert requirements == (REPO_ROOT / "requirements.lock").read_text()  # the lock: what the tests ran against
    assert "--hash=sha256:" in requirements


@pytest.mark.parametrize("version", PYTHONS)
def test_the_unpacked_package_serves_the_agent_tour(
    version: str, unpacked: Path, devhost_only: Path, cosmos: tuple[str, str], model: ScriptedModelServer,
    tmp_path: Path,
) -> None:
    python = interpreter(version)
    if python is None:
        pytest.skip(f"Python {version} is not installed here")
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    installed = subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--require-hashes", "-r", str(unpacked / "requirements.txt")],
        capture_output=True, text=True,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]

    endpoint, key = cosmos
    settings = {
        "WEBSITE_INSTANCE_ID": uuid.uuid4().hex,  # what Azure sets: the production guards are live
        "ALLOW_ANONYMOUS_ON_AZURE": "true",  # the tour calls with the function key only
        "TASKHUB_NAME": "packagetest",
        "COSMOS_ENDPOINT": endpoint,
        "COSMOS_KEY": key,
        "COSMOS_DATABASE": f"package-py{version.replace('.', '')}-{uuid.uuid4().hex[:8]}",
        "OPENAI_BASE_URL": model.base_url,  # an OpenAI-compatible endpoint: MODEL_PROVIDER=auto picks `compatible`
        "CONTINUATION_TOKEN_SECRET": secrets.token_urlsafe(32),
        "PYTHONPATH": "",
    }
    host = SubprocessHost(unpacked, state_path=tmp_path / "engine.sqlite3", env=settings,
                          python=venv / "bin/python", devhost_path=devhost_only, startup_timeout=60)
    with host:
        served = host.client.get("/api/health").json()
        tour = agent_tour(host.client)
        runtime = host.client.get("/api/health").json()
    assert (served["store"], served["model_provider"], served["durable_backend"]) == (
        "cosmos", "compatible", "azureManaged")
    assert served["on_azure"] is True and served["task_hub"] == "packagetest"
    assert [w.split(":")[0] for w in served["warnings"]] == ["AUTH_MODE=none"]
    assert runtime == served
    assert tour["status"] == "completed"
    assert [r for r in tour["tool_results"] if "'status': 'sent'" in r and "bob@example.com" in r], tour
    interpreter_used = subprocess.run([str(venv / "bin/python"), "-c", "import sys, azure.functions as f; "
                                       "print('%d.%d' % sys.version_info[:2], f.__version__)"],
                                      capture_output=True, text=True, check=True).stdout.split()
    assert interpreter_used[0] == version
    assert interpreter_used[1].startswith("2." if version == "3.13" else "1.")


def agent_tour(client: httpx.Client) -> dict:
    """The README's tour: a run whose tool call needs approval, the approval, then polling to completion."""
    started = client.post("/api/agents/assistant/runs",
                          json={"input": "Email bob@example.com to say hi", "wait_seconds": 20})
    assert started.status_code == 202, started.text
    run = started.json()
    assert run["status"] == "requires_action", run
    [approval] = run["pending_approvals"]
    assert approval["tool"] == "send_email"
    decided = client.post(f"/api/runs/{run['run_id']}/approvals/{approval['approval_id']}",
                          json={"decision": "approve"})
    assert decided.status_code == 202, decided.text
    token, updates, view = run["continuation_token"], [], run
    for _ in range(30):
        polled = client.get(f"/api/runs/{run['run_id']}", params={"continuation_token": token, "wait_seconds": 10})
        assert polled.status_code in (200, 202), polled.text
        view = polled.json()
        updates += view["updates"]
        token = view["continuation_token"]
        if polled.status_code == 200:
            break
    results = [c for u in updates for c in u["message"]["contents"] if c["type"] == "function_result"]
    return {"status": view["status"], "tool_results": [str(r.get("result")) for r in results]}


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
