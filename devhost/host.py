"""One running devhost: the indexed app, its Durable engine and the HTTP server, started and stopped together."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from devhost.app_loader import AppLoadError, FunctionIndex, FunctionInfo, load_app
from devhost.engine.api import Clock, DurableEngine, EngineOptions
from devhost.execution import FunctionExecutor, InProcessExecutor, LiveHttpExecutor
from devhost.http.admin import AdminHandler
from devhost.http.client_binding import build_client_binding
from devhost.http.durable_api import DurableHttpApi
from devhost.http.functions import HttpFunctions, public_route
from devhost.http.host_config import HostConfig, HostConfigError
from devhost.http.keys import FunctionKeys, auth_level
from devhost.http.routes import RouteTemplateError
from devhost.http.server import HttpHost
from devhost.http.trigger import HttpTriggerSpec
from devhost.protocol.timefmt import timespan_c
from devhost.workers import WorkerPool

log = logging.getLogger("devhost")

WORKER_COUNT_SETTING = "FUNCTIONS_WORKER_PROCESS_COUNT"
WORKER_MODE_SETTING = "DEVHOST_WORKER"
WORKER_MODES = ("auto", "runtime", "inprocess")
INPROCESS_WORKER = "devhost-inprocess"
# Set for the app devhost runs (and its worker processes): `/api/health` reports `durable_engine: devhost`.
ENGINE_SETTING = "DEVHOST_ENGINE"
ENGINE_NAME = "devhost"
MAX_WORKERS = 64


def mark_devhost_environment() -> None:
    """Set `ENGINE_SETTING` before the app loads, whether it is served or only listed: the app can tell devhost from
    Azure (`agent_runs.deployment`)."""
    os.environ[ENGINE_SETTING] = ENGINE_NAME


class RouteInfo(BaseModel):
    """One served HTTP trigger, as printed at startup."""

    model_config = ConfigDict(frozen=True)

    function_name: str
    methods: tuple[str, ...] | None
    url: str


def _http_spec(info: FunctionInfo, http_v2: bool) -> HttpTriggerSpec:
    try:
        return HttpTriggerSpec.from_function_info(info, http_v2=http_v2)
    except RouteTemplateError as exc:
        raise AppLoadError(f"{info.script_file}: function '{info.name}': invalid route '{info.route}': {exc}") from exc


def route_infos(specs: Iterable[HttpTriggerSpec], route_prefix: str, origin: str) -> list[RouteInfo]:
    return [RouteInfo(function_name=s.function_name, methods=s.methods, url=origin + public_route(route_prefix, s))
            for s in specs]


def http_specs(index: FunctionIndex) -> list[HttpTriggerSpec]:
    """The app's HTTP triggers, as the host serves them."""
    return [_http_spec(info, index.http_v2) for info in index.http_functions()]


def index_routes(index: FunctionIndex, config: HostConfig, origin: str) -> list[RouteInfo]:
    """The routes an app's index would serve at `origin`, without serving them (`--list-functions`)."""
    return route_infos(http_specs(index), config.route_prefix, origin)


def default_state_path(app_dir: str | Path) -> str:
    return str(Path(app_dir) / ".devhost" / "state.sqlite3")


class DevHost:
    """Use `await DevHost.start(...)` on the loop that will serve it; `await host.stop()` on the same loop."""

    def __init__(self, index: FunctionIndex, config: HostConfig, engine: DurableEngine, http: HttpHost,
                 functions: FunctionExecutor) -> None:
        self.index = index
        self.config = config
        self.engine = engine
        self.http = http
        self.functions = functions

    @classmethod
    async def start(
        cls,
        app: str | Path | FunctionIndex,
        *,
        port: int = 0,
        state_path: str | None = ":memory:",
        clock: Clock | None = None,
        options: EngineOptions | None = None,
        workers: int | None = None,
        function_keys: str | Path | None = None,
        worker: str | None = None,
    ) -> DevHost:
        """Load (unless given an index), open the engine on `state_path`, bind 127.0.0.1:`port` (0 = free port).

        `function_keys`: a keys file (devhost.http.keys): HTTP triggers then need their `authLevel`'s key, as on
        Azure; without one no key is checked, as under `func start`.

        `workers`: 0 runs every function in this process; N > 0 runs activities and HTTP functions in N worker
        processes (each imports the app itself, so app state shared between invocations must live in a store, as on
        Azure). None reads `FUNCTIONS_WORKER_PROCESS_COUNT` (after `local.settings.json`), default 0.

        `worker`: "runtime" runs every function through Azure's worker library in worker processes (Python 3.13+,
        `azure-functions-runtime`; see devhost.worker: the index comes from the worker, devhost never imports the
        app), "inprocess" through devhost's own calls, "auto" (None reads `DEVHOST_WORKER`, default auto) the real
        worker wherever it is installed.
        """
        mark_devhost_environment()
        worker_count = worker_count_setting() if workers is None else workers
        functions: FunctionExecutor
        live: LiveHttpExecutor | None = None
        worker_label = INPROCESS_WORKER
        if use_real_worker(app, worker):
            from devhost.worker.pool import RuntimeWorkerPool

            pool = await RuntimeWorkerPool.start(Path(str(app)), worker_count or 1)
            if pool.index is None:
                await pool.close()
                raise AppLoadError(f"{app}: the worker returned no function metadata")
            index, functions, worker_label = pool.index, pool, pool.name
            live = pool if index.http_v2 else None
        else:
            index = app if isinstance(app, FunctionIndex) else load_app(app)
        try:
            config = HostConfig.load(index.app_dir)
            keys = FunctionKeys.load(function_keys) if function_keys is not None else None
        except BaseException:
            if worker_label != INPROCESS_WORKER:
                await functions.close()
            raise
        if worker_label == INPROCESS_WORKER:
            if worker_count:
                functions = await WorkerPool.start(index.app_dir, worker_count,
                                                   log_level=logging.getLevelName(log.getEffectiveLevel()))
                live = InProcessExecutor(index.app_dir) if index.http_v2 else None
            else:
                functions = InProcessExecutor(index.app_dir)
        engine: DurableEngine | None = None
        http: HttpHost | None = None
        try:
            engine = await DurableEngine.open(
                index,
                state_path=state_path or default_state_path(index.app_dir),
                clock=clock,
                options=engine_options(config, options),
                functions=functions,
                client_binding_follows=True,  # set below, once the HTTP API it names listens
            )
            http_functions = HttpFunctions(
                http_specs(index),
                route_prefix=config.route_prefix,
                hub_name=config.hub_name,
                functions=functions,
                rpc_origin=lambda: http.origin if http else "",
                live=live,
                function_timeout=config.function_timeout,
                keys=keys,
                auth_levels={info.name: auth_level(info.bindings) for info in index.http_functions()},
            )
            http = HttpHost(
                http_functions,
                DurableHttpApi(engine, hub_name=config.hub_name,
                               webhook_code=keys.durable_webhook_key if keys is not None else None),
                admin=AdminHandler(engine), port=port,
                status=host_status(config, engine.options, worker_label),
            )
            await http.start()
            listening = http
            engine.set_client_binding(
                lambda: build_client_binding(listening.origin, task_hub=config.hub_name).to_json()
            )
        except BaseException:
            if engine is not None:
                await engine.close()
            await functions.close()
            if live is not None and live is not functions:
                await live.close()
            raise
        return cls(index, config, engine, http, functions)

    @property
    def port(self) -> int:
        if self.http.port is None:
            raise RuntimeError("devhost's HTTP server is not listening")
        return self.http.port

    @property
    def base_url(self) -> str:
        return self.http.origin

    @property
    def worker_pids(self) -> list[int]:
        """The live worker processes (empty when functions run in the host process)."""
        pids = getattr(self.functions, "pids", None)  # devhost's WorkerPool or the real worker's pool
        return list(pids) if pids is not None else []

    def routes(self) -> list[RouteInfo]:
        return route_infos(self.http.functions.specs, self.http.functions.route_prefix, self.base_url)

    async def stop(self) -> None:
        """Stop serving, then close the engine (running user code finishes and is committed)."""
        try:
            await self.http.stop()
        finally:
            try:
                await self.engine.close()
            finally:
                await self.functions.close()
                live = self.http.functions.live
                if live is not None and live is not self.functions:
                    await live.close()
                await _close_sdk_session()


def engine_options(config: HostConfig, given: EngineOptions | None) -> EngineOptions:
    """host.json's Durable settings as engine options; options a caller set explicitly win (tests tune them)."""
    default = config.default_concurrency()
    from_config = {
        "task_hub": config.hub_name,
        "max_concurrent_activities": config.max_concurrent_activities or default,
        "max_concurrent_orchestrators": config.max_concurrent_orchestrators or default,
        "max_concurrent_entities": config.max_concurrent_entities or default,
        "function_timeout_seconds": (config.function_timeout.total_seconds()
                                     if config.function_timeout is not None else None),
        "storage_provider": config.storage_provider.value,
    }
    if given is None:
        return EngineOptions(**from_config)
    return given.model_copy(update={k: v for k, v in from_config.items() if k not in given.model_fields_set})


def host_status(config: HostConfig, options: EngineOptions, worker: str = "devhost-inprocess") -> dict[str, Any]:
    """`GET /admin/host/status` beyond `state`: what runs the functions (`worker`: "azure-functions-runtime
    <version>" or "devhost-inprocess"), who runs the orchestrations, and the host.json values applied."""
    timeout = config.function_timeout
    durable = {"engine": ENGINE_NAME, "configuredBackend": config.storage_provider.value, "taskHub": config.hub_name,
               "maxConcurrentActivityFunctions": options.max_concurrent_activities,
               "maxConcurrentOrchestratorFunctions": options.max_concurrent_orchestrators,
               "maxConcurrentEntityFunctions": options.max_concurrent_entities}
    # host.json `retry` is validated and shown; the runtime applies it to no trigger devhost serves.
    retry = config.retry.model_dump(mode="json", exclude_none=True) if config.retry else None
    return {"worker": worker, "functionTimeout": timespan_c(timeout) if timeout is not None else None,
            "retry": retry, "durable": durable}


def use_real_worker(app: str | Path | FunctionIndex, worker: str | None) -> bool:
    """Whether this start runs the app through Azure's worker library (see `DevHost.start`)."""
    from devhost.worker.pool import library_version

    mode = (worker or os.environ.get(WORKER_MODE_SETTING, "") or "auto").strip().lower()
    if mode not in WORKER_MODES:
        raise HostConfigError(f"{WORKER_MODE_SETTING}={mode!r}: expected one of {', '.join(WORKER_MODES)}")
    if mode == "inprocess" or isinstance(app, FunctionIndex):
        return False
    if mode == "runtime" and library_version() is None:
        raise HostConfigError("the real worker (azure-functions-runtime) needs Python 3.13+ with the package "
                              "installed; use --worker inprocess here")
    return library_version() is not None


def worker_count_setting() -> int:
    """`FUNCTIONS_WORKER_PROCESS_COUNT` as a worker count (unset or empty: 0, everything in the host process)."""
    raw = os.environ.get(WORKER_COUNT_SETTING, "").strip()
    if not raw:
        return 0
    if not raw.isdigit() or int(raw) > MAX_WORKERS:
        raise HostConfigError(f"{WORKER_COUNT_SETTING}={raw!r}: expected a whole number from 0 to {MAX_WORKERS}")
    return int(raw)


async def _close_sdk_session() -> None:
    """The SDK keeps one module-global aiohttp session bound to the loop that created it: close it with this loop,
    so a later host on another loop (tests start many) gets a fresh one instead of a dead one."""
    try:
        from azure.durable_functions.models.utils import http_utils
    except ImportError:  # pragma: no cover - the SDK is a dependency of every app devhost serves
        return
    session = getattr(http_utils, "_client_session", None)
    if session is not None and not session.closed:
        try:
            await session.close()
        except Exception:  # a session created on another loop; drop it anyway
            log.debug("could not close the SDK's HTTP session", exc_info=True)
    http_utils._client_session = None
    # Its lock binds to the first loop that waits on it; give the next loop a fresh one.
    http_utils._session_lock = asyncio.Lock()
