"""Settings classes read per request without rebuilding them each time: building a `BaseSettings` walks every field
against the environment (about 1 ms for `NotificationSettings`), which a start request paid twice.

`current_settings(cls)` returns the instance built for the environment as it is now: the cache holds one instance
per class with a copy of the environment it was built from, and builds again as soon as any variable differs. The
comparison is with the mapping `os.environ` keeps its variables in (`_environment`): one dict compare in C, ~1 us per
call where copying `os.environ` decodes every variable (~30 us, and a start request asks twice). The settings
classes read nothing but the environment (no env files, no secrets directories), so an instance built from an equal
environment is equal: a changed setting is seen by the next call, as before. This module and `named_settings` are
the only ones outside the settings classes that read the environment (`tests/deploy/test_code_rules.py`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic_settings import BaseSettings

S = TypeVar("S", bound=BaseSettings)

_built: dict[type[BaseSettings], tuple[dict[Any, Any], BaseSettings]] = {}


def _environment() -> Mapping[Any, Any]:
    """The variables as `os.environ` holds them: CPython keeps them encoded in `os.environ._data`, which every
    change through `os.environ` (and so every setting pydantic-settings can see) updates at once; elsewhere a copy."""
    raw = getattr(os.environ, "_data", None)
    return raw if isinstance(raw, dict) else dict(os.environ)


def current_settings(cls: type[S]) -> S:
    """`cls()` for the current environment (cached while the environment is unchanged; treat it as read-only)."""
    environment = _environment()
    found = _built.get(cls)
    if found is not None and found[0] == environment:
        return found[1]  # type: ignore[return-value]  # keyed by its own class
    settings = cls()
    _built[cls] = (dict(environment), settings)  # a copy: the live mapping changes; threads racing at worst both build
    return settings
