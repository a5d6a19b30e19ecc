"""Workflows by name, loaded from the top-level `served_workflows/` package and checked against the served agents.

Every module of the package may define `WorkflowDefinition`s at module level; `WorkflowRegistry.from_package`
imports them all, so a bad definition (unknown agent, reference to a later step...) fails at start-up with a
message naming the module and the step, never in the middle of a run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from agent_runs.settings import PackageSettings
from agent_runtime.definitions import DefinitionRegistry
from workflow_runtime.definition import WorkflowDefinition, WorkflowDefinitionError


class UnknownWorkflowError(LookupError):
    pass


class WorkflowRegistry(DefinitionRegistry[WorkflowDefinition]):
    kind = "workflow"
    definition_type = WorkflowDefinition
    definition_error = WorkflowDefinitionError
    unknown_error = UnknownWorkflowError
    missing_package_hint = (": set WORKFLOWS_PACKAGE to an importable package (default served_workflows; none "
                            "serves none)")

    def check_agents(self, known_agents: Iterable[str]) -> None:
        agents = set(known_agents)
        for definition in self.all():
            definition.check_agents(agents)


_lock = threading.Lock()
_imported: dict[str, WorkflowRegistry] = {}
_checked: set[str] = set()

SHIPPED_PACKAGE = "served_workflows"


def workflows_package() -> str | None:
    """`WORKFLOWS_PACKAGE` (`none` serves no workflows). Unset: the shipped `served_workflows`, which are built on the
    shipped agents, so an app serving another `AGENTS_PACKAGE` serves no workflows unless it names its own."""
    settings = PackageSettings()
    configured = (settings.workflows_package or "").strip()
    if configured:
        return None if configured.lower() == "none" else configured
    return SHIPPED_PACKAGE if settings.agents_package.strip() in ("", "served_agents") else None


def package_workflows(package: str) -> WorkflowRegistry:
    """The definitions of one package, imported once per process. Reads no setting: the `workflow` orchestrator
    gets the package name in its input (the API chose it when it started the workflow) and calls this on replay."""
    with _lock:
        registry = _imported.get(package)
        if registry is None:
            registry = _imported[package] = WorkflowRegistry.from_package(package)
        return registry


def load_workflows(known_agents: Iterable[str], package: str | None = None) -> WorkflowRegistry:
    """The process's served registry (loaded and checked against the agents once per package; empty when no package
    is served). Reads the settings: for the API and start-up, never for orchestrator code."""
    name = package or workflows_package()
    if name is None:
        return WorkflowRegistry()
    registry = package_workflows(name)
    with _lock:
        if name not in _checked:
            registry.check_agents(known_agents)
            _checked.add(name)
    return registry
