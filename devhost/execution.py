"""Where activity and HTTP functions run: on the host's loop and threads, or in worker processes.

The engine and the HTTP server hand every activity and HTTP invocation to a `FunctionExecutor`. `InProcessExecutor`
runs them in this process (async functions on the loop, sync ones on a thread pool, like one Python worker);
`devhost.workers.WorkerPool` sends them to worker processes (the `FUNCTIONS_WORKER_PROCESS_COUNT` analogue), each of
which runs them with its own `InProcessExecutor`. Orchestrator episodes (`run_orchestrator`) and entity batches
(`run_entity_batch`) go the same way: off the loop, in a worker process when there are some.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any, Protocol, TypeVar

from aiohttp import web

from devhost.app_loader import FunctionInfo
from devhost.http import streaming
from devhost.http.conversion import HttpRequestData, HttpResponseData
from devhost.http.trigger import HttpTriggerSpec, invoke_http_function
from devhost.invoke import (
    ActivityOutcome,
    invoke_activity_async,
    invoke_activity_sync,
    invoke_entity_batch,
    invoke_orchestrator,
)
from devhost.protocol.actions import OrchestratorOutput
from devhost.protocol.entity_messages import BatchResult
from devhost.sync_pool import LoopCall, SyncThreadPool

log = logging.getLogger("devhost")
T = TypeVar("T")

THREADPOOL_SETTING = "PYTHON_THREADPOOL_THREAD_COUNT"


def sync_thread_count() -> int:
    """The Python worker's sync thread pool size: `PYTHON_THREADPOOL_THREAD_COUNT` when it is a whole number >= 1,
    else (unset, or invalid: the worker warns and reverts) the worker's `ThreadPoolExecutor` default,
    min(32, CPUs + 4)."""
    raw = os.environ.get(THREADPOOL_SETTING, "").strip()
    if raw:
        if raw.isdigit() and int(raw) >= 1:
            return int(raw)
        log.warning("%s must be set to a value between 1 and %s. Reverting to default value.", THREADPOOL_SETTING,
                    "sys.maxsize")
    return min(32, (os.cpu_count() or 1) + 4)


def run_on_pool(executor: Executor, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
    """`loop.run_in_executor(executor, fn, *args)` with one hop back: the pool thread hands the outcome to the loop
    with one `call_soon_threadsafe` (see devhost.sync_pool). As there, a call cancelled before a thread took it never
    runs."""
    loop = asyncio.get_running_loop()
    if isinstance(executor, SyncThreadPool):
        return executor.run_soon(loop, fn, *args)
    future: asyncio.Future[T] = loop.create_future()
    executor.submit(LoopCall(loop, future, fn, args).run)
    return future


class FunctionExecutor(Protocol):
    async def run_activity(
        self, function: FunctionInfo, input_text: str | None, client_binding_json: str | None = None
    ) -> ActivityOutcome:
        """Run an activity (with the Durable client's binding JSON if it takes one); user failures come back as a
        failed outcome, never raised."""
        ...

    async def run_http(
        self, spec: HttpTriggerSpec, request: HttpRequestData, client_binding_json: str | None
    ) -> HttpResponseData:
        """Run an HTTP function; raises `FunctionFailedError` when user code fails or its result cannot be encoded."""
        ...

    async def close(self) -> None: ...


class LiveHttpExecutor(Protocol):
    async def serve_http_v2(
        self, spec: HttpTriggerSpec, request: HttpRequestData, client_binding_json: str | None,
        connection: web.Request,
    ) -> web.StreamResponse:
        """Run an HTTP v2 function on the client's live connection (its response streams as it is produced)."""
        ...

    async def close(self) -> None: ...


class FunctionFailedError(Exception):
    """The function raised (or returned something unencodable); the host answers 500, as the Functions host does."""


class InProcessExecutor:
    """Async functions on the running loop, sync functions on a thread pool of this process."""

    def __init__(self, function_directory: str, *, threads: int | None = None,
                 executor: Executor | None = None) -> None:
        self._function_directory = function_directory
        self._own_executor = executor is None
        self.threads = threads or sync_thread_count()
        self._executor = executor or SyncThreadPool(self.threads, thread_name_prefix="devhost-sync")

    @property
    def executor(self) -> Executor:
        """The sync thread pool (`PYTHON_THREADPOOL_THREAD_COUNT`)."""
        return self._executor

    async def run_activity(
        self, function: FunctionInfo, input_text: str | None, client_binding_json: str | None = None
    ) -> ActivityOutcome:
        if function.is_async:
            return await invoke_activity_async(function, input_text, client_binding_json)
        return await run_on_pool(self._executor, invoke_activity_sync, function, input_text, client_binding_json)

    def run_orchestrator(
        self, function: FunctionInfo, trigger_json: str, previous: OrchestratorOutput | None = None
    ) -> Awaitable[OrchestratorOutput]:
        """One episode on the sync thread pool (the orchestrator handler is sync), never on the loop: a hang is
        bounded by the caller's functionTimeout while the loop goes on. `previous`: see `invoke_orchestrator`."""
        return run_on_pool(self._executor, invoke_orchestrator, function, trigger_json, previous)

    async def run_entity_batch(self, function: FunctionInfo, batch_json: str, batch_size: int) -> BatchResult:
        """One entity batch on the sync thread pool; raises EntityInternalError where the extension aborts it."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, invoke_entity_batch, function, batch_json, batch_size)

    async def run_http(
        self, spec: HttpTriggerSpec, request: HttpRequestData, client_binding_json: str | None
    ) -> HttpResponseData:
        if spec.http_v2:
            return await self._run_http_v2_buffered(spec, request, client_binding_json)
        try:
            result = await invoke_http_function(
                spec,
                request.to_func_request(),
                client_binding_json=client_binding_json,
                executor=self._executor,
                function_directory=self._function_directory,
            )
            return HttpResponseData.from_result(result)
        except (Exception, SystemExit) as exc:  # user code never stops the host
            raise FunctionFailedError(f"{type(exc).__name__}: {exc}") from exc

    async def _run_http_v2_buffered(
        self, spec: HttpTriggerSpec, request: HttpRequestData, client_binding_json: str | None
    ) -> HttpResponseData:
        """HTTP v2 mode, the whole response at once (what a worker process sends back to the host)."""
        scope = streaming.asgi_scope(request, request.params, None)
        try:
            result = await invoke_http_function(
                spec, streaming.make_request(scope, streaming.buffered_receive(request.body)),
                client_binding_json=client_binding_json, executor=self._executor,
                function_directory=self._function_directory,
            )
            return await streaming.render_buffered(streaming.as_response(result), scope)
        except (Exception, SystemExit) as exc:
            raise FunctionFailedError(f"{type(exc).__name__}: {exc}") from exc

    async def serve_http_v2(
        self, spec: HttpTriggerSpec, request: HttpRequestData, client_binding_json: str | None,
        connection: web.Request,
    ) -> web.StreamResponse:
        """HTTP v2 mode on the client's live connection: chunks reach the client as the function's response yields
        them; a client that leaves cancels the generator. Raises `FunctionFailedError` when the function raises."""
        peer = connection.transport.get_extra_info("peername") if connection.transport else None
        scope = streaming.asgi_scope(request, request.params, tuple(peer[:2]) if peer else None)
        try:
            result = await invoke_http_function(
                spec, streaming.make_request(scope, streaming.live_receive(request.body, connection)),
                client_binding_json=client_binding_json, executor=self._executor,
                function_directory=self._function_directory,
            )
            response = streaming.as_response(result)
        except (Exception, SystemExit) as exc:
            raise FunctionFailedError(f"{type(exc).__name__}: {exc}") from exc
        return await streaming.send_live(response, scope, connection, request.body)

    async def close(self) -> None:
        if self._own_executor:
            self._executor.shutdown(wait=False, cancel_futures=True)
