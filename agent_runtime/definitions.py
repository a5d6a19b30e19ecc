"""A registry of named definitions (agents, workflows) loaded from a package at start-up.

Every module of the package may define definitions at module level; loading imports them all, so a bad module or
an invalid definition fails the app's start with a message naming the module and the field, and two different
definitions with one name are refused.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from types import ModuleType
from typing import ClassVar, Generic, Protocol, Self, TypeVar

from pydantic import ValidationError


class Named(Protocol):
    @property
    def name(self) -> str: ...


D = TypeVar("D", bound=Named)


class DefinitionRegistry(Generic[D]):
    """Definitions by name. Subclasses say what they hold and which errors they raise."""

    kind: ClassVar[str] = "definition"
    definition_type: ClassVar[type]
    definition_error: ClassVar[type[Exception]] = ValueError
    unknown_error: ClassVar[type[LookupError]] = LookupError
    requires_definitions: ClassVar[bool] = False  # an empty package is an error (nothing to serve)
    # A package that does not exist is a setting to fix: what to set, appended to the import error.
    missing_package_hint: ClassVar[str] = ""

    def __init__(self, definitions: Iterable[D] = ()) -> None:
        self._definitions: dict[str, D] = {}
        for definition in definitions:
            self.register(definition)

    def register(self, definition: D, *, source: str = "") -> None:
        existing = self._definitions.get(definition.name)
        if existing is not None and existing is not definition:
            where = f" (in {source})" if source else ""
            raise self.definition_error(f"{self.kind} {definition.name!r} is defined twice{where}")
        self._definitions[definition.name] = definition

    def get(self, name: str) -> D:
        try:
            return self._definitions[name]
        except KeyError:
            known = ", ".join(sorted(self._definitions)) or "none"
            raise self.unknown_error(f"no {self.kind} named {name!r} (known: {known})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._definitions

    def names(self) -> list[str]:
        return sorted(self._definitions)

    def all(self) -> list[D]:
        return [self._definitions[name] for name in self.names()]

    @classmethod
    def from_package(cls, package: str) -> Self:
        """Import every module of `package` and register the definitions they define at module level."""
        registry = cls()
        for module in _import_package(package, cls.kind, cls.definition_error, cls.missing_package_hint):
            for value in vars(module).values():
                if isinstance(value, cls.definition_type):
                    registry.register(value, source=module.__name__)
        if cls.requires_definitions and not registry.names():
            raise cls.definition_error(f"{cls.kind} package {package!r} defines no {cls.definition_type.__name__}")
        return registry


def _import_package(package: str, kind: str, error: type[Exception], missing_hint: str = "") -> list[ModuleType]:
    try:
        root = importlib.import_module(package)
    except (ImportError, ValidationError, ValueError, TypeError) as exc:
        hint = missing_hint if _is_missing(package, exc) else ""
        raise error(f"cannot load {kind} package {package!r}: {describe_error(exc)}{hint}") from exc
    modules = [root]
    for info in pkgutil.iter_modules(getattr(root, "__path__", []), prefix=f"{package}."):
        try:
            modules.append(importlib.import_module(info.name))
        except (ImportError, ValidationError, ValueError, TypeError) as exc:
            raise error(f"invalid {kind} module {info.name!r}: {describe_error(exc)}") from exc
    return modules


def _is_missing(package: str, exc: BaseException) -> bool:
    """The package itself (or a parent of it) does not exist, not a module it imports."""
    name = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    return bool(name) and (package == name or package.startswith(f"{name}."))


def describe_error(exc: BaseException) -> str:
    """A definition error in one line: each field at fault with its reason (pydantic), else the exception."""
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'definition'}: {e['msg']}" for e in exc.errors(include_url=False)
        )
    return f"{type(exc).__name__}: {exc}"
