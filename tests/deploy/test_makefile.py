"""The README's two commands as make plans them (`make -n`, nothing run): `make run` makes and uses the project's
environment, installs only what running needs (the lock and agentctl, no test tools) and honours PORT; `make test`
installs everything in the same environment, checks requirements.txt with each Python's own pip, runs pytest there."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def plan(*args: str, venv: Path) -> str:
    # Under `make test` this runs inside make: the inherited MAKELEVEL/MAKEFLAGS would add "Entering directory"
    # lines and outer flags to the plan, so the plan is asked for as a user at a shell would.
    env = {k: v for k, v in os.environ.items() if k not in {"MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES"}}
    done = subprocess.run(["make", "--no-print-directory", "-n", *args, f"VENV={venv}"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def test_make_run_makes_the_environment_installs_only_what_running_needs_and_honours_port(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    steps = plan("run", "PORT=8123", venv=venv)
    assert f"python3 -m venv {venv}" in steps  # never the system Python's packages (Debian refuses those)
    assert f"{venv}/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes -r " \
           "requirements.lock" in steps
    assert f"{venv}/bin/python -m pip install --quiet --disable-pip-version-check -e ." in steps  # agentctl
    assert "requirements-dev.txt" not in steps and "-m pytest" not in steps and "npm" not in steps
    assert steps.rstrip().endswith(f"{venv}/bin/python -m devhost --port 8123")


def test_make_test_installs_everything_in_the_same_environment_and_runs_pytest_there(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    steps = plan("test", venv=venv)
    assert f"{venv}/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c " \
           "requirements-constraints.txt" in steps
    assert "python -m pip install --quiet --disable-pip-version-check -r requirements.txt" in steps  # each Python
    assert steps.rstrip().endswith(f"{venv}/bin/python -m pytest")
