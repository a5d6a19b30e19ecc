"""The app's settings in the end-to-end tests, and starting it in-process with them."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from app_services import start_app_host, stop_app_host
from e2e_harness import InProcessApp

from devhost.host import use_real_worker

E2E_DIR = Path(__file__).resolve().parent
REPO_ROOT = E2E_DIR.parent.parent
TOKEN_SECRET = "e2e-continuation-secret"


@contextmanager
def importable(*folders: Path) -> Iterator[None]:
    """The test packages in `folders` (the fixture agents a test app serves by `AGENTS_PACKAGE`) import in this
    process (in-process hosts) and in child hosts and real-worker processes (PYTHONPATH, which they inherit)."""
    paths = [str(folder) for folder in folders]
    added = [path for path in paths if path not in sys.path]
    sys.path[:0] = added
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (*paths, saved) if p)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
        for path in added:
            sys.path.remove(path)


def app_settings(model_url: str, **extra: str) -> dict[str, str]:
    """The app settings every test host gets: our agents, our model server, a known token secret."""
    return {
        "AGENTS_PACKAGE": "fixture_agents",
        "SCRIPTED_MODEL_URL": model_url,
        "MODEL_PROVIDER": "scripted",
        "CONTINUATION_TOKEN_SECRET": TOKEN_SECRET,
        **extra,
    }


@contextmanager
def running_app(env: dict[str, str], store_backend: str) -> Iterator[InProcessApp]:
    """Start the app on devhost with `env` as its settings; at exit let it settle, close its services (store,
    model clients) and stop the host.

    `SESSION_STORE_PATH=":memory:"` asks for a store of this host's own. Through the real worker the app runs in
    other processes, which share no memory with this one (where the test reads the store): the store is then a
    SQLite file of its own, removed at exit."""
    with tempfile.TemporaryDirectory(prefix="e2e-store-") as folder:
        if env.get("SESSION_STORE_PATH") == ":memory:" and use_real_worker(REPO_ROOT, None):
            env = {**env, "SESSION_STORE_PATH": str(Path(folder) / "sessions.sqlite3")}
        host = start_app_host(REPO_ROOT, clock="virtual", env=env)
        app = InProcessApp(host, store_backend)
        try:
            yield app
            app.settle()  # let work a test left running finish before its store is closed under it
        finally:
            stop_app_host(host)


# Tests that read what the app recorded from this process's in-memory OpenTelemetry sink (`telemetry.testing`): the
# app must run in this process. Through the real worker the same spans are checked as a collector receives them
# (OTLP: test_e2e_telemetry_crash.py, test_e2e_redaction.py).
reads_the_in_process_sink = pytest.mark.skipif(
    use_real_worker(REPO_ROOT, None),
    reason="reads the app's spans and metrics from this process's memory; through the real worker they are checked "
    "over OTLP (test_e2e_telemetry_crash.py, test_e2e_redaction.py)",
)

# Tests that watch the app's own code as it runs (a spy on one of its modules): the app must run in this process.
watches_the_app_in_process = pytest.mark.skipif(
    use_real_worker(REPO_ROOT, None), reason="spies on the app's modules; through the real worker they run elsewhere"
)
