"""The app's settings in the end-to-end tests, and starting it in-process with them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from e2e_harness import InProcessApp

from devhost.testing import InProcessHost

E2E_DIR = Path(__file__).resolve().parent
REPO_ROOT = E2E_DIR.parent.parent
TOKEN_SECRET = "e2e-continuation-secret"


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
    """Start the app in-process with `env` as its settings; at exit let it settle, close its services (store,
    model clients) and stop the host."""
    host = InProcessHost(REPO_ROOT, clock="virtual", env=env).start()
    app = InProcessApp(host, store_backend)
    try:
        yield app
        app.settle()  # let work a test left running finish before its store is closed under it
    finally:
        try:
            app.services().reset()
        finally:
            host.stop()
