"""A devhost serving this repository's `function_app.py` with the `worker` agent against a given model URL."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from devhost.engine.api import EngineOptions
from devhost.testing import InProcessHost
from devhost.testing.inprocess import ClockMode

REPO_ROOT = Path(__file__).resolve().parents[2]
AGENTS_PACKAGE = "bench.workload.agents"
TOKEN_SECRET = "load-test-secret-not-for-production-0123456789"
START_PATH = "/api/agents/worker/runs"  # where the workload's agent starts a run


def app_env(model_url: str, store_path: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The app settings of a workload host (store, model, agents, token secret)."""
    return {
        "SESSION_STORE_PATH": store_path,
        "SCRIPTED_MODEL_URL": model_url,
        "AGENTS_PACKAGE": AGENTS_PACKAGE,
        "CONTINUATION_TOKEN_SECRET": TOKEN_SECRET,
        **(extra or {}),
    }


@contextmanager
def workload_host(
    model_url: str,
    *,
    store_path: str = ":memory:",
    state_path: str = ":memory:",
    clock: ClockMode = "real",
    options: EngineOptions | None = None,
    env: Mapping[str, str] | None = None,
    workers: int = 0,
) -> Iterator[InProcessHost]:
    """Start the app on devhost; at exit close the app's services (store thread, model clients), then the host.

    `workers` > 0 runs activity and HTTP functions in that many worker processes (the store must then be a file)."""
    if workers and store_path == ":memory:":
        raise ValueError("worker processes share the session store through a file: give a store_path")
    host = InProcessHost(
        REPO_ROOT, clock=clock, state_path=state_path, options=options, env=app_env(model_url, store_path, env),
        workers=workers,
    )
    host.start()
    try:
        yield host
    finally:
        close_app_services()
        host.stop()


def close_app_services() -> None:
    """`RunServices.reset()` on the module object the host imported (each host re-imports the app's modules)."""
    services = sys.modules.get("agent_runs.services")
    if services is not None:
        services.RunServices.reset()
