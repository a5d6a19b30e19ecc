"""app_loader: settings before import, app discovery (DFApp, FunctionApp + blueprints), classification, errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from engine_helpers import APPS

from devhost.app_loader import AppLoadError, load_app


def _write_app(directory: Path, source: str, settings: dict | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "function_app.py").write_text(source)
    if settings is not None:
        (directory / "local.settings.json").write_text(json.dumps({"IsEncrypted": False, "Values": settings}))
    return directory


def test_settings_are_applied_before_import_without_overriding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEVHOST_ALREADY_SET", "from-env")
    monkeypatch.delenv("DEVHOST_FROM_SETTINGS", raising=False)
    source = (
        "import os\nimport azure.functions as func\n"
        "SEEN = os.environ['DEVHOST_FROM_SETTINGS']\n"
        "app = func.FunctionApp()\n"
        "@app.route(route='x')\ndef x(req: func.HttpRequest) -> func.HttpResponse:\n"
        "    return func.HttpResponse(SEEN)\n"
    )
    app_dir = _write_app(tmp_path / "app", source, {"DEVHOST_FROM_SETTINGS": "yes", "DEVHOST_ALREADY_SET": "no"})
    try:
        index = load_app(app_dir)
        assert os.environ["DEVHOST_FROM_SETTINGS"] == "yes" and os.environ["DEVHOST_ALREADY_SET"] == "from-env"
    finally:
        os.environ.pop("DEVHOST_FROM_SETTINGS", None)
    (http,) = index.http_functions()
    assert (http.name, http.route, http.methods, http.return_binding) == ("x", "x", None, "$return")


def test_classifies_every_trigger_and_looks_up_case_insensitively() -> None:
    index = load_app(APPS / "entity_counter")
    assert {f.name for f in index.orchestrators()} >= {"counter_orch", "call_or_timeout"}
    assert index.entity("COUNTER") is not None and index.entity("counter").entity_name == "Counter"  # type: ignore[union-attr]
    assert index.activity("NOOP") is not None and index.orchestrator("noop") is None


def test_blueprint_functions_are_found_on_a_plain_function_app() -> None:
    index = load_app(APPS / "blueprint_app")
    assert index.orchestrator("greet_all") is not None
    greet = index.activity("greet")
    assert greet is not None and greet.is_async
    assert [f.name for f in index.http_functions()] == ["ping"]


def test_import_error_names_the_file_and_line(tmp_path: Path) -> None:
    app_dir = _write_app(tmp_path / "broken", "import azure.functions as func\n\nraise RuntimeError('nope')\n")
    with pytest.raises(AppLoadError, match=r"function_app\.py.*line 3|function_app\.py:3") as info:
        load_app(app_dir)
    assert "RuntimeError: nope" in str(info.value)


def test_missing_app_object_and_duplicate_names_are_reported(tmp_path: Path) -> None:
    with pytest.raises(AppLoadError, match="no function app object"):
        load_app(_write_app(tmp_path / "empty", "X = 1\n"))
    duplicate = (
        "import azure.durable_functions as df\napp = df.DFApp()\n"
        "@app.activity_trigger(input_name='x')\ndef a(x):\n    return x\n"
        "@app.function_name('a')\n@app.activity_trigger(input_name='x')\ndef b(x):\n    return x\n"
    )
    with pytest.raises(AppLoadError, match="Function a does not have a unique function name"):
        load_app(_write_app(tmp_path / "dup", duplicate))
    with pytest.raises(AppLoadError, match="file not found"):
        load_app(tmp_path / "nowhere")
