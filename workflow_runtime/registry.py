"""Workflows by name, loaded from the top-level `workflows/` package and checked against the served agents.

Every module of the package may define `WorkflowDefinition`s at module level; `WorkflowRegistry.from_package`
imports them all, so a bad definition (unknown agent, reference to a later step...) fails at start-up with a
message naming the module and the step, never in the middle of a run.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import threading
from collections.abc import Iterable

from pydantic import ValidationError

from workflow_runtime.definition import WorkflowDefinition, WorkflowDefinitionError

WORKFLOWS_PACKAGE_SETTING = "WORKFLOWS_PACKAGE"
AGENTS_PACKAGE_SETTING = "AGENTS_PACKAGE"


class UnknownWorkflowError(LookupError):
    pass


class WorkflowRegistry:
    def __init__(self, definitions: Iterable[WorkflowDefinition] = ()) -> None:
        self._definitions: dict[str, WorkflowDefinition] = {}
        for definition in definitions:
            self.register(definition)

    def register(self, definition: WorkflowDefinition, *, source: str = "") -> None:
        existing = self._definitions.get(definition.name)
        if existing is not None and existing is not definition:
            raise WorkflowDefinitionError(f"workflow {definition.name!r} is defined twice ({source or 'registry'})")
        self._definitions[definition.name] = definition

    def get(self, name: str) -> WorkflowDefinition:
        try:
            return self._definitions[name]
        except KeyError:
            known = ", ".join(sorted(self._definitions)) or "none"
            raise UnknownWorkflowError(f"no workflow named {name!r} (known: {known})") from None

    def names(self) -> list[str]:
        return sorted(self._definitions)

    def all(self) -> list[WorkflowDefinition]:
        return [self._definitions[name] for name in self.names()]

    def check_agents(self, known_agents: Iterable[str]) -> None:
        agents = set(known_agents)
        for definition in self._definitions.values():
            definition.check_agents(agents)

    @classmethod
    def from_package(cls, package: str = "workflows") -> WorkflowRegistry:
        registry = cls()
        try:
            root = importlib.import_module(package)
        except (ImportError, ValidationError, ValueError, TypeError) as exc:
            raise WorkflowDefinitionError(f"cannot load workflow package {package!r}: {exc}") from exc
        modules = [root]
        for info in pkgutil.iter_modules(getattr(root, "__path__", []), prefix=f"{package}."):
            try:
                modules.append(importlib.import_module(info.name))
            except (ImportError, ValidationError, ValueError, TypeError) as exc:
                raise WorkflowDefinitionError(f"invalid workflow module {info.name!r}: {exc}") from exc
        for module in modules:
            for value in vars(module).values():
                if isinstance(value, WorkflowDefinition):
                    registry.register(value, source=module.__name__)
        return registry


_lock = threading.Lock()
_loaded: dict[str, WorkflowRegistry] = {}


def workflows_package() -> str | None:
    """`WORKFLOWS_PACKAGE` (`none` serves no workflows). Unset: the shipped `workflows`, which are built on the
    shipped agents, so an app serving another `AGENTS_PACKAGE` serves no workflows unless it names its own."""
    configured = os.environ.get(WORKFLOWS_PACKAGE_SETTING, "").strip()
    if configured:
        return None if configured.lower() == "none" else configured
    agents = os.environ.get(AGENTS_PACKAGE_SETTING, "").strip()
    return "workflows" if agents in ("", "agents") else None


def load_workflows(known_agents: Iterable[str], package: str | None = None) -> WorkflowRegistry:
    """The process's registry (loaded and checked once per package; empty when no package is served)."""
    name = package or workflows_package()
    if name is None:
        return WorkflowRegistry()
    with _lock:
        registry = _loaded.get(name)
        if registry is None:
            registry = WorkflowRegistry.from_package(name)
            registry.check_agents(known_agents)
            _loaded[name] = registry
        return registry
