"""Load and fault tests: the real app on devhost (in process, loopback only), the real `openai` client against the
scripted model server, the SQLite store in a file per test (so a crashed host can be reopened on it).

Budget: the whole directory runs in well under 4 minutes on 2 cores; counts and deadlines are bounded.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.workload.brain import WorkloadBrain
from scripted_model.server import ScriptedModelServer


@pytest.fixture(scope="module")
def model_server() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer(WorkloadBrain()).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    return str(tmp_path / "sessions.sqlite3")
