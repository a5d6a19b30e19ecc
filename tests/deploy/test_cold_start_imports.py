"""A cold start imports only what a cold HTTP poll needs (`bench/cold_start_bench.py` measures the time).

`import function_app` runs on every new Functions worker before the first request is served. Model clients (the
openai SDK), MCP, JSON Schema validation, the OpenTelemetry SDK (traces, metrics, exporters), Azure Monitor, the Cosmos,
identity and Slack SDKs and PyJWT are loaded by the first call that uses them. A module-level import of one of them
anywhere on the app's import graph fails here (in a fresh interpreter, so nothing another test imported hides it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFERRED = (
    "openai",
    "mcp",
    "jsonschema",
    "regex",  # with jsonschema: the patterns of schemas from outside
    "opentelemetry.sdk",  # tracing and metrics SDK: only when telemetry is exported
    "opentelemetry.exporter",
    "azure.monitor",
    "azure.cosmos",
    "azure.identity",
    "slack_sdk",
    "jwt",  # AUTH_MODE=jwt only
)


def _modules_after_import() -> set[str]:
    code = "import json, sys; import function_app; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_importing_the_app_loads_none_of_the_deferred_packages() -> None:
    loaded = _modules_after_import()
    early = sorted(m for m in loaded if any(m == d or m.startswith(d + ".") for d in DEFERRED))
    assert not early, f"imported at start-up (import them where they are used, TYPE_CHECKING for types): {early}"
    assert "function_app" in loaded and "azure.durable_functions" in loaded  # the check looked at a real start


MODEL_CENSUS = """
import json, sys
import function_app
from pydantic import BaseModel

def subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from subclasses(sub)

models = {m for m in subclasses(BaseModel) if not m.__pydantic_generic_metadata__.get("origin")}
built = sorted(f"{m.__module__}.{m.__qualname__}" for m in models if m.__pydantic_complete__)
failed = []
for model in models - {m for m in models if m.__pydantic_complete__}:
    try:
        model.model_rebuild(force=True, raise_errors=True)  # its validator and serializer, as a first use builds
    except Exception as error:
        failed.append(f"{model.__module__}.{model.__qualname__}: {type(error).__name__}: {error}"[:300])
print(json.dumps({"models": len(models), "built": built, "failed": failed}))
"""


def test_the_app_builds_its_models_on_first_use_and_every_one_of_them_builds() -> None:
    """`function_app` defines ~350 pydantic models (its own and its libraries'); building them was most of the
    import (`agent_runtime/model_builds.py`). A cold start builds only those the start-up itself uses; every other
    one still builds (forced here), so a broken model fails this test rather than the first request using it."""
    done = subprocess.run([sys.executable, "-c", MODEL_CENSUS], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=True)
    census = json.loads(done.stdout.strip().splitlines()[-1])
    assert census["models"] > 200  # the census saw the real app
    assert len(census["built"]) < census["models"] / 4, census["built"]
    assert not census["failed"], census["failed"]


def test_the_deferred_packages_still_load_where_they_are_used() -> None:
    """The lazy names resolve (a typo in a deferred import would only fail at the first model call otherwise)."""
    from agent_runtime import models
    from agent_runtime.models.openai_client import OpenAIChatClient

    assert models.OpenAIChatClient is OpenAIChatClient
    assert callable(models.assemble_response) and callable(models.entra_token_provider)
