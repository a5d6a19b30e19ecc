"""Pydantic models defined during the app's start-up are built on first use (`defer_build`), not at import.

Building a model's validator and serializer is most of what importing the app costs (~350 models: the app's records,
contracts and HTTP models, and libraries' such as FastAPI's OpenAPI models, which this app never uses). A cold HTTP
poll uses a handful of them; with `defer_build` each is built the first time it validates or serializes (the same
validator, built once), and the others never. `function_app.py` imports everything inside
`deferred_model_builds()`; models defined later (a test's, a lazily imported SDK's) are built as before.
`tests/deploy/test_cold_start_imports.py` builds every model the app defines, so a model that cannot be built still
fails a test, not a request.

Pydantic has no public switch for "every model of these modules", so this sets the default of the `defer_build`
config key (`pydantic._internal._config.config_defaults`) for the duration; a model setting `defer_build` itself
keeps its own value. Should a pydantic release drop that dictionary, the import is simply not deferred (slower,
never wrong).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def _defaults() -> dict[str, Any] | None:
    try:
        from pydantic._internal import _config
    except ImportError:
        return None
    defaults = getattr(_config, "config_defaults", None)
    return defaults if isinstance(defaults, dict) and "defer_build" in defaults else None


@contextmanager
def deferred_model_builds() -> Iterator[bool]:
    """Models defined inside the block are built on first use; yields whether deferral is in effect."""
    defaults = _defaults()
    if defaults is None:
        yield False
        return
    before = defaults["defer_build"]
    defaults["defer_build"] = True
    try:
        yield True
    finally:
        defaults["defer_build"] = before
