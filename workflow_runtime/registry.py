"""Workflows by name, loaded from the top-level `workflows/` package and checked against the served agents.

Every module of the package may define `WorkflowDefinition`s at module level; `WorkflowRegistry.from_package`
imports them all, so a bad definition (unknown agent, reference to a later step...) fails at start-up with a
message naming the module and the step, never in the middle of a run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable

from agent_runtime.definitions import DefinitionRegistry
from workflow_runtime.definition import WorkflowDefinition, WorkflowDefinitionError

WORKFLOWS_PACKAGE_SETTING = "WORKFLOWS_PACKAGE"
AGENTS_PACKAGE_SETTING = "AGENTS_PACKAGE"


class UnknownWorkflowError(LookupError):
    pass


class WorkflowRegistry(DefinitionRegistry[WorkflowDefinition]):
    kind = "workflow"
    definition_type = WorkflowDefinition
    definition_error = WorkflowDefinitionError
    unknown_error = UnknownWorkflowError

    def check_agents(self, known_agents: Iterable[str]) -> None:
        agents = set(known_agents)
        for definition in self.all():
            definition.check_agents(agents)


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
