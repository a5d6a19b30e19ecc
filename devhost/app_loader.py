"""Load a v2-model Azure Functions app and index its functions by trigger.

Mirrors what Core Tools + the Python worker do before serving: apply `local.settings.json` `Values` to the
environment (never overriding variables already set), put the app directory on `sys.path`, import
`function_app.py`, find the module-level `azure.functions.FunctionRegister` (a `df.DFApp`, a `func.FunctionApp` with
registered blueprints, ...) and call `get_functions()` exactly once (a second call raises "does not have a unique
function name").
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import azure.functions as func
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

FunctionKind = Literal["http", "orchestration", "activity", "entity", "other"]

_TRIGGER_KINDS: dict[str, FunctionKind] = {
    "httpTrigger": "http",
    "orchestrationTrigger": "orchestration",
    "activityTrigger": "activity",
    "entityTrigger": "entity",
}


class AppLoadError(Exception):
    """The app could not be imported or indexed; the message names the file (and function when known)."""


class FunctionInfo(BaseModel):
    """One indexed function. `fn` is `Function.get_user_function()` (already wrapped by the DF decorators)."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str
    kind: FunctionKind
    trigger_type: str
    trigger_param: str
    bindings: list[dict[str, Any]]
    fn: Callable[..., Any]
    script_file: str
    # http only
    route: str | None = None
    methods: list[str] | None = None
    durable_client_param: str | None = None
    return_binding: str | None = None
    # http only, HTTP v2 mode (azurefunctions-extensions-http-fastapi): the function returns a streamed response
    streams: bool = False
    # entity only: the name the extension registers (binding `entityName`, else the function name)
    entity_name: str | None = None

    @property
    def is_async(self) -> bool:
        return _is_coroutine_function(self.fn)


@functools.lru_cache(maxsize=1024)
def _is_coroutine_function(fn: Callable[..., Any]) -> bool:
    """Cached: an indexed function object does not change (every activity invocation asks)."""
    return inspect.iscoroutinefunction(fn)


class FunctionIndex(BaseModel):
    """All functions of the app, classified by trigger. Durable lookups are case-insensitive like `FunctionName`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    app_dir: str
    app: Any = None
    functions: list[FunctionInfo] = Field(default_factory=list)
    # The app uses a web extension (HTTP v2 mode: every HTTP function gets the extension's request type).
    http_v2: bool = False
    _lookup: dict[tuple[str, str], FunctionInfo] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any, /) -> None:
        for f in self.functions:
            self._lookup.setdefault((f.kind, (f.entity_name or f.name).lower()), f)

    def _by_kind(self, kind: FunctionKind) -> list[FunctionInfo]:
        return [f for f in self.functions if f.kind == kind]

    def http_functions(self) -> list[FunctionInfo]:
        return self._by_kind("http")

    def other_functions(self) -> list[FunctionInfo]:
        return self._by_kind("other")

    def orchestrators(self) -> list[FunctionInfo]:
        return self._by_kind("orchestration")

    def activities(self) -> list[FunctionInfo]:
        return self._by_kind("activity")

    def entities(self) -> list[FunctionInfo]:
        return self._by_kind("entity")

    def _find(self, kind: FunctionKind, name: str) -> FunctionInfo | None:
        # (the private attribute's dict itself: `self._lookup` goes through pydantic's __getattr__, ~1 us per lookup,
        # and replay looks up every function an episode schedules)
        lookup: dict[tuple[str, str], FunctionInfo] = self.__pydantic_private__["_lookup"]  # type: ignore[index]
        return lookup.get((kind, name.lower()))

    def orchestrator(self, name: str) -> FunctionInfo | None:
        return self._find("orchestration", name)

    def activity(self, name: str) -> FunctionInfo | None:
        return self._find("activity", name)

    def entity(self, name: str) -> FunctionInfo | None:
        return self._find("entity", name)

    @classmethod
    def from_functions(cls, app_dir: str, app: Any, functions: list[Any], module: Any = None) -> FunctionIndex:
        """Build the index from `azure.functions.decorators.function_app.Function` objects, refusing what Azure's
        Python worker refuses to index (devhost.worker.indexing)."""
        from devhost.worker.indexing import check_app

        described = [describe_function(f) for f in functions]
        http_v2 = _http_v2_mode(module, described)
        try:
            check_app(functions, http_v2=http_v2 or _http_v2_mode(module, described, honour_setting=False))
        except Exception as exc:
            where = _script_of(functions, app_dir, module)
            raise AppLoadError(f"{where}: indexing failed: {type(exc).__name__}: {exc}") from exc
        if http_v2:
            described = [_check_http_v2(f) for f in described]
        return cls(app_dir=app_dir, app=app, functions=described, http_v2=http_v2)

    @classmethod
    def from_app(cls, app: func.FunctionRegister, app_dir: str = ".") -> FunctionIndex:
        """Index an app object already in memory (tests build apps inline this way)."""
        try:
            functions = app.get_functions()
        except Exception as exc:
            raise AppLoadError(f"{app_dir}: indexing the function app failed: {type(exc).__name__}: {exc}") from exc
        return cls.from_functions(app_dir, app, functions)


def _script_of(functions: list[Any], app_dir: str, module: Any) -> str:
    if module is not None and getattr(module, "__file__", None):
        return str(module.__file__)
    return str(functions[0].function_script_file) if functions else app_dir


def describe_function(function: Any) -> FunctionInfo:
    """One index entry from a `Function` (or anything with its accessors: the real worker's metadata)."""
    name = function.get_function_name()
    try:
        bindings = [json.loads(raw) for raw in function.get_raw_bindings()]
    except Exception as exc:
        raise AppLoadError(f"function '{name}': its bindings cannot be serialised: {exc}") from exc
    trigger = next((b for b in bindings if str(b.get("type", "")).endswith("Trigger")), None)
    if trigger is None:
        raise AppLoadError(f"function '{name}' in {function.function_script_file} has no trigger binding")
    trigger_type = trigger["type"]
    kind = _TRIGGER_KINDS.get(trigger_type, "other")
    info: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "trigger_type": trigger_type,
        "trigger_param": trigger["name"],
        "bindings": bindings,
        "fn": function.get_user_function(),
        "script_file": str(function.function_script_file),
    }
    # Any function may take the Durable client (an activity that starts another orchestration, as on Azure).
    info["durable_client_param"] = next((b["name"] for b in bindings if b.get("type") == "durableClient"), None)
    if kind == "http":
        info["route"] = trigger.get("route") or name
        methods = trigger.get("methods")
        info["methods"] = [str(m).upper() for m in methods] if methods else None
        info["return_binding"] = next(
            (b["name"] for b in bindings if b.get("type") == "http" and b.get("direction") == "OUT"), None
        )
    elif kind == "entity":
        info["entity_name"] = trigger.get("entityName") or name
    return FunctionInfo(**info)


def _http_v2_mode(module: Any, functions: list[FunctionInfo], *, honour_setting: bool = True) -> bool:
    from devhost.http.streaming import app_uses_extension

    return app_uses_extension(module, [f.fn for f in functions if f.kind == "http"], honour_setting=honour_setting)


def _check_http_v2(info: FunctionInfo) -> FunctionInfo:
    if info.kind != "http":
        return info
    from devhost.http.streaming import HttpV2LoadError, check_function

    try:
        streams = check_function(info.name, info.fn, info.trigger_param)
    except HttpV2LoadError as exc:
        raise AppLoadError(f"{info.script_file}: {exc}") from exc
    return info.model_copy(update={"streams": streams})


def apply_local_settings(app_dir: Path) -> list[str]:
    """Copy `Values` of `local.settings.json` into `os.environ` without overriding set variables; returns names set."""
    settings_file = app_dir / "local.settings.json"
    if not settings_file.is_file():
        return []
    try:
        values = json.loads(settings_file.read_text(encoding="utf-8-sig")).get("Values") or {}
    except (OSError, ValueError) as exc:
        raise AppLoadError(f"{settings_file}: not valid JSON: {exc}") from exc
    applied = []
    for key, value in values.items():
        if key not in os.environ and value is not None:
            os.environ[key] = str(value)
            applied.append(key)
    return applied


def find_app_object(module: Any) -> func.FunctionRegister:
    """The module-level `FunctionRegister` (first one defined wins, like the worker's indexer)."""
    apps = [v for v in vars(module).values() if isinstance(v, func.FunctionRegister)]
    if not apps:
        raise AppLoadError(
            f"{module.__file__}: no function app object found (expected a module-level func.FunctionApp / df.DFApp)"
        )
    return apps[0]


def load_app(app_dir: str | os.PathLike[str], *, module_name: str = "function_app") -> FunctionIndex:
    """Apply settings, import `DIR/function_app.py` and index it. Raises `AppLoadError` with file/function names."""
    directory = Path(app_dir).resolve()
    script = directory / f"{module_name}.py"
    if not script.is_file():
        raise AppLoadError(f"{script}: file not found")
    apply_local_settings(directory)
    if str(directory) not in sys.path:
        sys.path.insert(0, str(directory))
    # A fresh import each load: tests load several apps that are all called `function_app`.
    sys.modules.pop(module_name, None)
    spec = importlib.util.spec_from_file_location(module_name, script)
    if spec is None or spec.loader is None:
        raise AppLoadError(f"{script}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        where = traceback.extract_tb(exc.__traceback__)[-1]
        raise AppLoadError(
            f"{script}: import failed at {where.filename}:{where.lineno}: {type(exc).__name__}: {exc}"
        ) from exc
    app = find_app_object(module)
    try:
        functions = app.get_functions()
    except Exception as exc:
        raise AppLoadError(f"{script}: indexing failed: {type(exc).__name__}: {exc}") from exc
    return FunctionIndex.from_functions(str(directory), app, functions, module)
