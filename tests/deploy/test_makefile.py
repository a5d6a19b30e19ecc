"""The README's two commands as make plans them (`make -n`, nothing run): `make run` makes and uses the project's
environment, installs only what running needs (the lock and agentctl, no test tools) and honours PORT; `make test`
installs everything in the same environment, checks requirements.txt with each Python's own pip, runs pytest there.
The environment's Python, run by make with fake interpreters: older than 3.11 is refused with the fix, and an
environment made by an older Python (or another than a PYTHON given) is made and installed again."""

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
    assert "make --no-print-directory -j2 -O test-main test-others" in steps  # the main suite beside the others
    assert f"{venv}/bin/python -m pytest --durations=15\n" in steps


def fake_python(path: Path, minor: int) -> Path:
    """A `python3.<minor>` for make: answers the version check, makes "environments" of itself (with the pyvenv.cfg a
    real one has) and records what it is asked to run instead of running pip."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = -m ] && [ "$2" = venv ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && '
        'echo made > "$3/pyvenv.cfg"; exit; fi\n'
        f'if [ "$1" = -m ]; then echo "python3.{minor} ran: $*"; exit; fi\n'
        f"echo 3.{minor}; [ {minor} -ge 11 ]\n"
    )
    path.chmod(0o755)
    return path


def make(*args: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in {"MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "PYTHON"}}
    if path is not None:
        env["PATH"] = f"{path}{os.pathsep}{env['PATH']}"
    return subprocess.run(["make", "--no-print-directory", *args], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_python_older_than_3_11_is_refused_before_anything_is_installed(tmp_path: Path) -> None:
    python = fake_python(tmp_path / "python3.10", 10)
    venv = tmp_path / "venv"
    done = make("run", f"VENV={venv}", f"PYTHON={python}")
    assert done.returncode != 0
    assert f"PYTHON={python} is Python 3.10: this app needs Python 3.11, 3.12 or 3.13; pass one, e.g. make run " \
           "PYTHON=python3.11" in done.stdout
    assert not venv.exists() and "ran:" not in done.stdout


def test_an_environment_made_by_an_older_python_is_made_again_and_installed_again(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    fake_python(venv / "bin" / "python", 10)
    (venv / ".installed-run").touch()  # installed once, by the old Python
    python = fake_python(tmp_path / "python3.11", 11)
    done = make("install", f"VENV={venv}", f"PYTHON={python}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{venv} was made by Python 3.10: making it again with PYTHON={python} (Python 3.11)" in done.stdout
    assert "python3.11 ran: -m pip install --quiet --disable-pip-version-check --require-hashes -r " \
           "requirements.lock" in done.stdout
    assert make("install", f"VENV={venv}", f"PYTHON={python}").stdout == ""  # then kept, nothing installed again


def test_an_environment_is_made_again_for_another_given_python_and_kept_when_none_is_given(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    fake_python(venv / "bin" / "python", 12)
    (venv / "pyvenv.cfg").write_text("made")
    fake_python(tmp_path / "bin" / "python3", 13)
    kept = make(f"{venv}/bin/python", f"VENV={venv}", path=tmp_path / "bin")  # PYTHON left at python3 (3.13 here)
    assert kept.returncode == 0 and "making it again" not in kept.stdout
    python = fake_python(tmp_path / "python3.11", 11)
    again = make(f"{venv}/bin/python", f"VENV={venv}", f"PYTHON={python}")
    assert f"{venv} was made by Python 3.12: making it again with PYTHON={python} (Python 3.11)" in again.stdout


def test_a_good_environment_is_kept_without_running_an_older_python3(tmp_path: Path) -> None:
    """`make run PYTHON=python3.12` once, then plain `make run` where python3 is 3.10 (Ubuntu 22.04's): kept."""
    venv = tmp_path / "venv"
    fake_python(venv / "bin" / "python", 12)
    (venv / "pyvenv.cfg").write_text("made")
    fake_python(tmp_path / "bin" / "python3", 10)
    kept = make(f"{venv}/bin/python", f"VENV={venv}", path=tmp_path / "bin")
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert kept.stdout == "" and (venv / "pyvenv.cfg").read_text() == "made"


def test_an_environment_whose_interpreter_is_gone_is_made_again(tmp_path: Path) -> None:
    """Its base Python uninstalled (pyenv, brew): `bin/python` is a dangling link, made again, not left broken."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(tmp_path / "gone" / "python3.11")
    python = fake_python(tmp_path / "python3.11", 11)
    done = make(f"{venv}/bin/python", f"VENV={venv}", f"PYTHON={python}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{venv} was made by Python (broken): making it again with PYTHON={python} (Python 3.11)" in done.stdout
    assert (venv / "bin" / "python").exists()
