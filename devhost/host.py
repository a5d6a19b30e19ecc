"""One running devhost: the indexed app, its Durable engine and the HTTP server, started and stopped together."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from devhost.app_loader import AppLoadError, FunctionIndex, FunctionInfo, load_app
from devhost.engine.api import Clock, DurableEngine, EngineOptions
from devhost.execution import FunctionExecutor, InProcessExecutor
from devhost.http.admin import AdminHandler
from devhost.http.durable_api import DurableHttpApi
from devhost.http.functions import HttpFunctions
from devhost.http.host_config import HostConfig, HostConfigError
from devhost.http.routes import RouteTemplateError
from devhost.http.server import HttpHost
from devhost.http.trigger import HttpTriggerSpec
from devhost.workers import WorkerPool

log = logging.getLogger("devhost")

WORKER_COUNT_SETTING = "FUNCTIONS_WORKER_PROCESS_COUNT"
MAX_WORKERS = 64


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
    ) -> DevHost:
        """Load (unless given an index), open the engine on `state_path`, bind 127.0.0.1:`port` (0 = free port).

        `workers`: 0 runs every function in this process; N > 0 runs activities and HTTP functions in N worker
        processes (each imports the app itself, so app state shared between invocations must live in a store, as on
        Azure). None reads `FUNCTIONS_WORKER_PROCESS_COUNT` (after `local.settings.json`), default 0.
        """
        index = app if isinstance(app, FunctionIndex) else load_app(app)
        config = HostConfig.load(index.app_dir)
        worker_count = worker_count_setting() if workers is None else workers
        functions: FunctionExecutor
        if worker_count:
            functions = await WorkerPool.start(index.app_dir, worker_count,
                                               log_level=logging.getLevelName(log.getEffectiveLevel()))
        else:
            functions = InProcessExecutor(index.app_dir)
        engine: DurableEngine | None = None
        http: HttpHost | None = None
        try:
            engine = await DurableEngine.open(
                index,
                state_path=state_path or default_state_path(index.app_dir),
                clock=clock,
                options=options or EngineOptions(task_hub=config.hub_name),
                functions=functions if worker_count else None,
            )
            http_functions = HttpFunctions(
                [_http_spec(info, index.http_v2) for info in index.http_functions()],
                route_prefix=config.route_prefix,
                hub_name=config.hub_name,
                functions=functions,
                rpc_origin=lambda: http.origin if http else "",
                live=InProcessExecutor(index.app_dir) if worker_count and index.http_v2 else None,
            )
            http = HttpHost(
                http_functions, DurableHttpApi(engine, hub_name=config.hub_name), admin=AdminHandler(engine), port=port
            )
            await http.start()
        except BaseException:
            if engine is not None:
                await engine.close()
            await functions.close()
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
        return self.functions.pids if isinstance(self.functions, WorkerPool) else []

    def routes(self) -> list[RouteInfo]:
        functions = self.http.functions
        return [
            RouteInfo(function_name=s.function_name, methods=s.methods, url=self.base_url + functions.public_route(s))
            for s in functions.specs
        ]

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
