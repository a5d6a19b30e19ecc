"""requirements.lock is current: for each supported Python, every runtime requirement in requirements.txt is pinned in
the lock to a version its range accepts, with hashes. (A stale lock means `make lock` was not run after a change.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHONS = ("3.11", "3.12", "3.13")


def requirements(path: Path) -> list[Requirement]:
    lines = [line.split(" #")[0].strip() for line in path.read_text().splitlines()]
    return [Requirement(line) for line in lines if line and not line.startswith(("#", "-"))]


def locked(python: str) -> dict[str, str]:
    """name -> pinned version, for the entries of the lock that apply to `python` on Linux (Azure Functions)."""
    text = (REPO_ROOT / "requirements.lock").read_text()
    entries = re.findall(r"^([A-Za-z0-9_.\-\[\]]+==\S+(?: ;[^\\\n]+)?) \\\n((?:\s+--hash=sha256:\w+(?: \\)?\n?)+)",
                         text, flags=re.MULTILINE)
    pins: dict[str, str] = {}
    for spec, hashes in entries:
        assert "--hash=sha256:" in hashes
        requirement = Requirement(spec)
        if requirement.marker is None or requirement.marker.evaluate(environment(python)):
            pins[canonicalize_name(requirement.name)] = str(next(iter(requirement.specifier)).version)
    return pins


def environment(python: str) -> dict[str, str]:
    return {**default_environment(), "python_version": python, "python_full_version": f"{python}.0",
            "sys_platform": "linux", "platform_system": "Linux", "implementation_name": "cpython",
            "platform_python_implementation": "CPython"}


@pytest.mark.parametrize("python", PYTHONS)
def test_every_requirement_is_locked_within_its_range(python: str) -> None:
    pins = locked(python)
    stale = []
    for requirement in requirements(REPO_ROOT / "requirements.txt"):
        if requirement.marker is not None and not requirement.marker.evaluate(environment(python)):
            continue
        version = pins.get(canonicalize_name(requirement.name))
        if version is None or not requirement.specifier.contains(version, prereleases=True):
            stale.append(f"{requirement} (locked: {version})")
    assert stale == [], f"requirements.lock is stale for Python {python}: run `make lock`: {stale}"


def test_azure_functions_follows_the_python_version() -> None:
    assert locked("3.12")["azure-functions"].startswith("1.")
    assert locked("3.13")["azure-functions"].startswith("2.")


def test_requirements_txt_installs_through_the_locks_pins() -> None:
    """`pip install -r requirements.txt` resolves with no search (the pip of Python 3.11/3.12 crashes backtracking):
    requirements.txt names the constraints file, and that file pins exactly what the lock pins (`make lock` writes
    it; `make test-requirements` installs requirements.txt with each Python's own pip)."""
    assert "-c requirements-constraints.txt" in (REPO_ROOT / "requirements.txt").read_text().splitlines()
    constraints = [
        line for line in (REPO_ROOT / "requirements-constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    lock = (REPO_ROOT / "requirements.lock").read_text()
    pins = re.findall(r"^([A-Za-z0-9_.\-\[\]]+==\S+(?: ;[^\\\n]+?)?) *\\$", lock, flags=re.MULTILINE)
    assert constraints == pins, "requirements-constraints.txt is stale: run `make requirements-constraints.txt`"
