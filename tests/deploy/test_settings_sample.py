"""`local.settings.sample.json` lists every setting the app reads, and nothing it does not.

The settings the app reads are found in the code that ships (the files of the deployment package): every field of
every `BaseSettings` class (by its alias), the app settings host.json names (`%NAME%` values and connection names),
and devhost's `FUNCTIONS_WORKER_PROCESS_COUNT` (a setting Azure honours). The app reads the environment through
nothing else (`test_code_rules.py`) but `agent_runtime.named_settings`, whose names come from agent definitions.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import shutil
from pathlib import Path
from unittest.mock import patch

from app_imports import forgetting_app_imports
from pydantic import AliasChoices
from pydantic_settings import BaseSettings

from agent_runs.settings import RunSettings
from agent_runtime.agents import AgentRegistry
from deploy.package import packaged_files
from devhost.app_loader import apply_local_settings
from devhost.host import WORKER_COUNT_SETTING
from workflow_runtime.registry import WorkflowRegistry, workflows_package

REPO_ROOT = Path(__file__).resolve().parents[2]
# Set by the platform on every instance (or by devhost for the app it runs), never by a user.
PLATFORM_SET = {"WEBSITE_INSTANCE_ID", "WEBSITE_AUTH_ENABLED", "WEBSITE_HOSTNAME", "DEVHOST_ENGINE"}
# Read by the Functions host itself, not by the app's code.
HOST_SETTINGS = {"FUNCTIONS_WORKER_RUNTIME", "AzureWebJobsStorage", "AzureWebJobsFeatureFlags",
                 "AzureFunctionsJobHost__extensions__durableTask__storageProvider__connectionStringName"}


# Read by libraries or the Python worker, not by our code: the service name of OpenTelemetry's resource (the SDK and
# the Azure Monitor distro read it) and the worker's indexing switch that the HTTP streaming extension needs.
LIBRARY_SETTINGS = {"OTEL_SERVICE_NAME", "PYTHON_ENABLE_INIT_INDEXING"}
# Read by the app (they choose its exporters) and by the OpenTelemetry SDK, and left out of the sample on purpose: an
# empty value there would replace the SDK's default endpoint (`http://localhost:4318`) with an empty one.
SDK_DEFAULTED = {"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"}


def sample_settings() -> set[str]:
    return set(json.loads((REPO_ROOT / "local.settings.sample.json").read_text())["Values"])


def shipped_modules() -> list[tuple[str, ast.Module]]:
    modules = []
    for relative in packaged_files(REPO_ROOT):
        if relative.endswith(".py"):
            name = relative[: -len(".py")].replace("/", ".").removesuffix(".__init__")
            modules.append((name, ast.parse((REPO_ROOT / relative).read_text(), relative)))
    return modules


def settings_class_aliases(module_name: str, tree: ast.Module) -> set[str]:
    names: set[str] = set()
    classes = [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    if not classes:
        return names
    module = importlib.import_module(module_name)
    for class_name in classes:
        cls = getattr(module, class_name, None)
        if not (isinstance(cls, type) and issubclass(cls, BaseSettings)) or cls.__module__ != module_name:
            continue
        for field_name, field in cls.model_fields.items():
            alias = field.validation_alias
            assert alias is not None, f"{module_name}.{class_name}.{field_name}: name its setting (validation_alias)"
            names.add(alias.choices[0] if isinstance(alias, AliasChoices) else str(alias))
    return names


def host_json_settings() -> set[str]:
    names: set[str] = set()

    def walk(value: object, key: str = "") -> None:
        if isinstance(value, dict):
            for child_key, child in value.items():
                walk(child, child_key)
        elif isinstance(value, str):
            if value.startswith("%") and value.endswith("%") and len(value) > 2:
                names.add(value.strip("%"))
            elif key.lower() in ("connectionstringname", "connectionname"):
                names.add(value)

    walk(json.loads((REPO_ROOT / "host.json").read_text()))
    return names


def settings_the_app_reads() -> set[str]:
    names = {WORKER_COUNT_SETTING} | host_json_settings()
    with forgetting_app_imports():
        for module_name, tree in shipped_modules():
            if "BaseSettings" in ast.unparse(tree):
                names |= settings_class_aliases(module_name, tree)
    return names - PLATFORM_SET


def test_the_sample_lists_every_setting_the_app_reads() -> None:
    missing = settings_the_app_reads() - sample_settings() - SDK_DEFAULTED
    assert missing == set(), f"add these to local.settings.sample.json and docs/configuration.md: {missing}"


def test_the_sample_lists_nothing_the_app_ignores() -> None:
    unknown = sample_settings() - settings_the_app_reads() - HOST_SETTINGS - LIBRARY_SETTINGS
    assert unknown == set(), f"local.settings.sample.json names settings nothing reads: {unknown}"


def test_the_discovery_finds_what_it_should() -> None:
    found = settings_the_app_reads()
    # one of each kind: settings fields (one inherited, one of an agents package), host.json, devhost
    assert {"COSMOS_ENDPOINT", "WORKFLOWS_PACKAGE", "MCP_EXAMPLE_URL", "TASKHUB_NAME",
            "DURABLE_TASK_SCHEDULER_CONNECTION_STRING", "FUNCTIONS_WORKER_PROCESS_COUNT", "AUTH_MODE"} <= found


def test_the_sample_copied_to_local_settings_serves_the_shipped_agents_and_workflows(tmp_path: Path) -> None:
    """docs/configuration.md says to copy the sample to local.settings.json: its values, applied as devhost applies
    them (nothing else set), must name packages that load (it once named `agents` and `workflows`, which do not exist,
    and `make run` stopped)."""
    shutil.copy(REPO_ROOT / "local.settings.sample.json", tmp_path / "local.settings.json")
    with patch.dict(os.environ, clear=False), forgetting_app_imports():
        for name in sample_settings():
            os.environ.pop(name, None)
        apply_local_settings(tmp_path)
        agents = AgentRegistry.from_package(RunSettings().agents_package)
        package = workflows_package()
        assert package is not None, "the sample serves no workflows"
        workflows = WorkflowRegistry.from_package(package)
        workflows.check_agents(agents.names())
    assert "assistant" in agents and workflows.names()
