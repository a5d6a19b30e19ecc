"""Forgetting the app's modules a test imported itself, so a later in-process host imports them again under its own
settings."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def _apps_own(module: object) -> bool:
    path = getattr(module, "__file__", None)
    if not path:
        return False
    resolved = Path(path).resolve()
    installed = "site-packages" in resolved.parts or "dist-packages" in resolved.parts
    return resolved.is_relative_to(REPO_ROOT) and not installed


@contextmanager
def forgetting_app_imports() -> Iterator[None]:
    """The app's modules read settings at import (e.g. served_agents/mcp_example.py): left in sys.modules, a later
    test's in-process host would reuse them as imported under this test's environment instead of its own."""
    imported_before = set(sys.modules)
    try:
        yield
    finally:
        for name in set(sys.modules) - imported_before:
            if not _apps_own(sys.modules[name]):
                continue  # a library: imported twice, its classes would no longer match (e.g. its exceptions)
            module = sys.modules.pop(name)
            parent_name, _, child = name.rpartition(".")
            parent = sys.modules.get(parent_name)
            if parent is not None and getattr(parent, child, None) is module:
                delattr(parent, child)  # else `from parent import child` would still find the old one
