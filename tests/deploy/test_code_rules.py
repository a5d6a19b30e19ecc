"""Two rules of the developers' guide, checked over the code itself:

- the app reads its settings only through the settings classes (`BaseSettings`: names, defaults and validation in
  one place, listed in `local.settings.sample.json`): no module that ships reads `os.environ` / `os.getenv`, except
  `agent_runtime.named_settings` (settings named by agent definitions, which no class can declare) and
  `agent_runtime.settings_snapshot` (compares the environment to reuse a settings instance built from it);
- no `assert` as a runtime check outside the tests (`python -O` drops them): a real check raises an exception
  that says what is wrong.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from deploy.package import packaged_files

REPO_ROOT = Path(__file__).resolve().parents[2]
ENVIRONMENT_READERS = {"agent_runtime/named_settings.py", "agent_runtime/settings_snapshot.py"}
NOT_SCANNED = {"tests", "node_modules", "dist", "__pycache__"}


ENVIRONMENT_NAMES = {"environ", "environb", "getenv", "getenvb"}


def environment_reads(tree: ast.Module) -> list[int]:
    """Lines that touch the process environment: `os.environ`, `os.getenv`, or either imported from `os`."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
            if node.attr in ENVIRONMENT_NAMES:
                lines.add(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            lines.update(node.lineno for alias in node.names if alias.name in ENVIRONMENT_NAMES)
    return sorted(lines)


def asserts(tree: ast.Module) -> list[int]:
    return sorted(node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert))


def parsed(relative: str) -> ast.Module:
    return ast.parse((REPO_ROOT / relative).read_text(encoding="utf-8"), relative)


def shipped_python() -> list[str]:
    return [path for path in packaged_files(REPO_ROOT) if path.endswith(".py")]


def python_outside_tests() -> list[str]:
    """Every Python file of the repository but the tests' (devhost, bench, agentctl, deploy... included)."""
    found = []
    for directory, subdirs, files in os.walk(REPO_ROOT):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d not in NOT_SCANNED)
        relative = Path(directory).relative_to(REPO_ROOT)
        found += [(relative / name).as_posix() for name in sorted(files) if name.endswith(".py")]
    return found


def test_the_scans_find_what_they_look_for() -> None:
    source = ast.parse(
        "import os\nfrom os import getenv\nx = os.environ.get('A')\ny = os.getenv('B')\nassert x, y\n"
        "os.environ['C'] = '1'\n"
    )
    assert environment_reads(source) == [2, 3, 4, 6]
    assert asserts(source) == [5]
    assert environment_reads(ast.parse("settings = MySettings()\nvalue = settings.environ\n")) == []


def test_the_app_reads_the_environment_only_through_settings_classes() -> None:
    shipped = shipped_python()
    assert "function_app.py" in shipped and "agent_runs/settings.py" in shipped  # the scan sees the app
    assert set(shipped) >= ENVIRONMENT_READERS
    checked = [path for path in shipped if path not in ENVIRONMENT_READERS]
    found = {path: lines for path in checked if (lines := environment_reads(parsed(path)))}
    assert found == {}, f"read these through a settings class (a BaseSettings field with its alias): {found}"


def test_no_assert_is_a_runtime_check_outside_the_tests() -> None:
    files = python_outside_tests()
    assert {"function_app.py", "devhost/host.py", "bench/checks.py"} <= set(files)  # the scan sees every kind of code
    found = {path: lines for path in files if (lines := asserts(parsed(path)))}
    assert found == {}, f"replace these asserts with checks that raise a specific exception: {found}"
