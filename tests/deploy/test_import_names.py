"""No top-level package or module of this repository takes an import name that a library uses.

The app's directory is on `sys.path` first (the Functions host runs from it, and so do its tests): a package here
named like a library's shadows that library for the app and for every test. `agents/` once did that to the OpenAI
Agents SDK (`import agents`) and `workflows/` to LlamaIndex Workflows; they are `served_agents/` and
`served_workflows/` now. This test keeps a new clash from coming in: every top-level name of the repository is
checked against the import names of the installed distributions (`importlib.metadata.packages_distributions()`)
and against `WIDELY_USED`, for libraries an app of this kind is likely to add that are not installed here.
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

# Import names of widely used libraries near this app's field (agents, LLM clients, Azure, web, data) that are not
# dependencies here, so `packages_distributions()` cannot know them. Add a name when a library of the field takes it.
WIDELY_USED = frozenset({
    "agents",  # openai-agents (the OpenAI Agents SDK)
    "workflows",  # llama-index-workflows
    "agent_framework",  # Microsoft Agent Framework
    "autogen", "autogen_agentchat", "autogen_core",  # AutoGen
    "semantic_kernel", "langchain", "langgraph", "llama_index", "crewai", "haystack", "dspy", "smolagents",
    "pydantic_ai", "openai", "anthropic", "google", "mistralai", "litellm", "tiktoken", "transformers", "mcp",
    "azure", "azurefunctions", "durabletask", "function_app",
    "fastapi", "flask", "django", "starlette", "uvicorn", "requests", "httpx", "aiohttp",
    "numpy", "pandas", "yaml", "jwt", "jose",
    "tests", "test", "src", "utils", "common", "core", "app", "api", "models", "tools", "settings", "config",
})

# Repository names that are not import packages of the app (the test tree is pytest's rootdir-based layout, and
# `tests` is also the name a few distributions wrongly ship, azure-functions-durable among them).
NOT_PACKAGES = frozenset({"tests"})
# The Functions host's own convention: it loads `function_app.py` from the app's root by that name.
REQUIRED_NAMES = frozenset({"function_app"})


def own_distribution() -> str:
    """This repository's own distribution (`make run` installs it editable for `agentctl`): its names are ours."""
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["name"]


def top_level_names() -> set[str]:
    names = set()
    for entry in REPO_ROOT.iterdir():
        if entry.is_dir() and (entry / "__init__.py").is_file():
            names.add(entry.name)
        elif entry.is_file() and entry.suffix == ".py":
            names.add(entry.stem)
    return names - NOT_PACKAGES


def test_no_top_level_name_shadows_a_library() -> None:
    own = own_distribution()
    installed = {name: dists for name, dists in importlib.metadata.packages_distributions().items()
                 if any(dist != own for dist in dists)}
    clashes = {
        name: installed.get(name, ["widely used"])
        for name in top_level_names() - REQUIRED_NAMES
        if name in installed or name in WIDELY_USED
    }
    assert clashes == {}, f"top-level names that shadow a library's import name (rename them): {clashes}"


def test_the_check_sees_the_packages() -> None:
    """The names checked are the repository's real packages (a guard against checking nothing)."""
    names = top_level_names()
    assert {"served_agents", "served_workflows", "http_api", "agent_runtime", "function_app"} <= names
    assert "agents" not in names and "workflows" not in names
