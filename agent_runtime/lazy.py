"""Package attributes imported on first use: a `__getattr__` (PEP 562) keeping heavy SDKs out of start-up."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_getattr(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """`__getattr__` for `package`: each name in `names` is taken from its submodule (`names[name]`) when first used."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f"{package}.{module}"), name)

    return __getattr__
