"""InProcessHost forgets the app's own modules at stop, never libraries - even those of a virtual environment inside
the app directory (`make test` runs from `.venv` in the repository): a library imported twice has two copies of its
classes, and its exceptions then escape the `except` clauses written against the first (seen with httpcore)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from devhost.testing.inprocess import _AppModules


def test_the_apps_modules_are_forgotten_and_installed_libraries_kept(tmp_path: Path, monkeypatch) -> None:
    site = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "some_library_for_the_test.py").write_text("VALUE = 1\n")
    (tmp_path / "some_app_module_for_the_test.py").write_text("VALUE = 2\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(tmp_path))
    modules = _AppModules(tmp_path)
    library = importlib.import_module("some_library_for_the_test")
    importlib.import_module("some_app_module_for_the_test")
    modules.forget()
    try:
        assert sys.modules.get("some_library_for_the_test") is library
        assert "some_app_module_for_the_test" not in sys.modules
    finally:
        sys.modules.pop("some_library_for_the_test", None)
