"""Helpers of the load/fault tests (a unique module name: other test directories have their own conftest)."""

from __future__ import annotations

import sys
from typing import Any

from devhost.testing import InProcessHost

# Waits for a run's progress only bound a failure; a loaded 2-core CI machine runs several times slower.
PROGRESS_TIMEOUT_S = 120.0


def app_store(host: InProcessHost) -> Any:
    """The session store the host's app uses (its own import of `agent_runs.services`)."""
    return sys.modules["agent_runs.services"].RunServices.current().store


def tool_executions() -> Any:
    """`EXECUTIONS` of the worker agent module the host imported (raw executions per idempotency key)."""
    return sys.modules["bench.workload.agents.worker"].EXECUTIONS
