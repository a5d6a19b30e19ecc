"""Real-worker mode: the app runs in worker processes through Azure's Python worker library (`azure-functions-runtime`).

devhost keeps what the Functions host does (HTTP server, Durable engine and replay, storage) and sends the worker
what Azure's host sends: `WorkerInitRequest` (the library imports and indexes the app: an app it refuses fails
here, with its message), `FunctionsMetadataRequest` (the index devhost serves comes from this answer, not from
importing the app itself), one `FunctionLoadRequest` per function, then an `InvocationRequest` per call of any
trigger. Processes: `count` workers for HTTP functions and activities (`FUNCTIONS_WORKER_PROCESS_COUNT`), plus one
for orchestrator episodes and entity batches, so that short deterministic episodes never queue behind long
activities on a worker's thread pool. A worker that crashes is replaced (its calls fail as on Azure: the activity
fails, the HTTP request gets 500, the episode is retried); one that hangs an episode past `episode_timeout` is
killed and replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import importlib.util
import logging
import os
import re
import secrets
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from devhost.app_loader import AppLoadError, FunctionIndex, FunctionInfo, apply_local_settings, describe_function
from devhost.execution import FunctionFailedError
from devhost.http.conversion import HttpRequestData, HttpResponseData
from devhost.http.streaming import client_gone, proxied_headers
from devhost.http.trigger import HttpTriggerSpec
from devhost.invoke import ActivityOutcome, activity_failure_text
from devhost.protocol.actions import OrchestratorOutput
from devhost.protocol.entity_messages import BatchResult
from devhost.worker import convert, rpc
from devhost.worker.channel import WorkerChannel, WorkerLostError
from devhost.worker.process import TOKEN_VARIABLE
from devhost.worker.wire import WireError, read_message

log = logging.getLogger("devhost.worker")

LIBRARY = "azure-functions-runtime"
HTTP_URI_CAPABILITY = "HttpUri"
# Starts of a worker that dies during its handshake, before giving up (the Functions host restarts a language worker
# that fails too). Workers started side by side can lose a race for a free port (the worker library's HTTP-streaming
# server picks one, then binds it): the loser exits, and another start picks another port.
START_ATTEMPTS = 3
INVOCATION_ID_HEADER = "x-ms-invocation-id"
# The directory that holds the `devhost` package: workers import it whatever the app directory is.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
# Hop-by-hop and length headers are the proxy's own business.
_NOT_FORWARDED = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade"}


class WorkerStartError(RuntimeError):
    """A worker process could not start or refused the app (the message is the worker's)."""


def library_version() -> str | None:
    """The installed `azure-functions-runtime` version, or None where it cannot run (it needs Python 3.13+)."""
    if sys.version_info < (3, 13) or importlib.util.find_spec("azure_functions_runtime") is None:
        return None
    return importlib.metadata.version(LIBRARY)


def worker_label() -> str:
    return f"{LIBRARY} {library_version()}"


class _MetadataFunction:
    """An `RpcFunctionMetadata` seen through the `Function` accessors devhost's index is built from."""

    def __init__(self, metadata: Any) -> None:
        self.metadata = metadata
        self.function_script_file = metadata.script_file

    def get_function_name(self) -> str:
        return str(self.metadata.name)

    def get_raw_bindings(self) -> list[str]:
        return list(self.metadata.raw_bindings)

    def get_user_function(self) -> Callable[..., Any]:
        name = self.metadata.name

        def runs_in_the_worker(*_: Any, **__: Any) -> Any:
            raise RuntimeError(f"function '{name}' runs in the worker process, not in devhost")

        return runs_in_the_worker


class RuntimeWorkerPool:
    """`await RuntimeWorkerPool.start(app_dir, count)`: a `FunctionExecutor` for every trigger, and the live HTTP
    executor for HTTP v2 apps."""

    def __init__(self, app_dir: str, count: int, *, startup_timeout: float, episode_timeout: float,
                 log_level: str) -> None:
        self.app_dir = app_dir
        self.count = count
        self.startup_timeout = startup_timeout
        self.episode_timeout = episode_timeout
        self.log_level = log_level
        self.name = worker_label()
        self.index: FunctionIndex | None = None
        self.function_ids: dict[str, str] = {}
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._address = "{}:{}".format(*self._listener.getsockname()[:2])
        self._arrivals: dict[str, Future[socket.socket]] = {}  # token -> the connection of the worker it names
        self._acceptor = threading.Thread(target=self._accept_loop, name="devhost-worker-accept", daemon=True)
        self._changed = threading.Condition()
        self._functions: list[WorkerChannel] = []
        self._durable: list[WorkerChannel] = []
        self._closing = False
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    async def start(cls, app_dir: str | os.PathLike[str], count: int = 1, *, startup_timeout: float = 120.0,
                    episode_timeout: float = 60.0, log_level: str = "WARNING") -> RuntimeWorkerPool:
        directory = str(Path(app_dir).resolve())
        if library_version() is None:
            raise WorkerStartError(f"{LIBRARY} is not installed for this Python ({sys.version.split()[0]})")
        apply_local_settings(Path(directory))  # Core Tools gives the worker local.settings.json's Values
        pool = cls(directory, max(1, count), startup_timeout=startup_timeout, episode_timeout=episode_timeout,
                   log_level=log_level)
        pool._acceptor.start()
        loop = asyncio.get_running_loop()
        try:  # the processes start side by side; the first to answer the metadata request gives the index
            groups = [pool._durable] + [pool._functions] * pool.count
            await asyncio.gather(*(loop.run_in_executor(None, pool._spawn, group) for group in groups))
        except BaseException:
            await pool.close()
            raise
        return pool

    @property
    def pids(self) -> list[int]:
        return self.function_pids + self.durable_pids

    @property
    def function_pids(self) -> list[int]:
        return [c.pid for c in self._functions if c.alive]

    @property
    def durable_pids(self) -> list[int]:
        return [c.pid for c in self._durable if c.alive]

    # ----- starting workers -----

    def _spawn(self, group: list[WorkerChannel]) -> WorkerChannel:
        channel = self._start_with_retries()
        with self._changed:
            closed = self._closing  # close() sets it before taking the lock, then stops the groups' workers
            if not closed:
                group.append(channel)
                self._changed.notify_all()
        if closed:  # the pool closed during this start (another start failed, the host stopped): close() missed it
            channel.stop()
            raise WorkerStartError(f"the worker process {channel.pid} started after its pool closed; stopped it")
        log.info("worker process %s ready (%s)", channel.pid, self.name)
        return channel

    def _start_with_retries(self) -> WorkerChannel:
        """`_start_one`, again when the process dies during its handshake (up to START_ATTEMPTS starts). An app the
        worker refuses is not retried: it would refuse it again."""
        attempt = 1
        while True:
            try:
                return self._start_one()
            except WorkerLostError as lost:
                if self._closing:
                    raise
                if attempt >= START_ATTEMPTS:
                    raise WorkerLostError(f"{lost}; each of its {START_ATTEMPTS} starts exited during its handshake") \
                        from lost
                attempt += 1
                log.warning("a worker process exited during its start; starting another (%d of %d)",
                            attempt, START_ATTEMPTS)

    def _start_one(self) -> WorkerChannel:
        process, sock = self._launch(secrets.token_hex(16))
        channel = WorkerChannel(process, sock, self._lost)
        try:
            self._handshake(channel)
        except BaseException:
            channel.stop()
            raise
        return channel

    def _launch(self, token: str) -> tuple[subprocess.Popen[bytes], socket.socket]:
        """Start a worker process named by `token` and take its connection. The token is awaited before the process
        starts: a worker that connected before this thread went on (a loaded machine, other starts holding the GIL)
        found nobody waiting for it, was closed, and exited with code 0 "before connecting"."""
        arrival: Future[socket.socket] = Future()
        with self._changed:
            self._arrivals[token] = arrival
        try:
            process = self._popen(token)
            try:
                return process, self._accept(process, arrival)
            except BaseException:
                process.kill()
                process.wait()
                raise
        finally:
            with self._changed:
                self._arrivals.pop(token, None)

    def _popen(self, token: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, TOKEN_VARIABLE: token, "FUNCTIONS_WORKER_PROCESS_COUNT": str(self.count)}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (self.app_dir, _PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        return subprocess.Popen(
            [sys.executable, "-m", "devhost.worker", "--connect", self._address, "--log-level", self.log_level],
            env=env, cwd=self.app_dir,
        )

    def _accept(self, process: subprocess.Popen[bytes], arrival: Future[socket.socket]) -> socket.socket:
        """The worker's connection, once its `StartStream` arrives (bounded; fails early when the process exits
        first)."""
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            try:
                return arrival.result(timeout=0.2)
            except TimeoutError:
                if process.poll() is not None:
                    raise WorkerStartError(
                        f"a worker process exited with code {process.returncode} before connecting") from None
        raise WorkerStartError(f"a worker process did not connect within {self.startup_timeout:.0f} s")

    def _accept_loop(self) -> None:
        """Take connections and hand each to the start waiting for its token; anything else is closed."""
        while not self._closing:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return  # the listener closed
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small request/response frames: no Nagle
            sock.settimeout(self.startup_timeout)
            try:
                hello = read_message(sock)
            except WireError:
                hello = None
            sock.settimeout(None)
            token = hello.start_stream.worker_id if hello is not None and hello.WhichOneof(
                "content") == "start_stream" else ""
            with self._changed:
                arrival = next((f for t, f in self._arrivals.items() if secrets.compare_digest(t, token)), None)
            if arrival is None or arrival.done():
                sock.close()
            else:
                arrival.set_result(sock)

    def _handshake(self, channel: WorkerChannel) -> None:
        """What the host sends a new worker: init (the library indexes the app), metadata, one load per function."""
        init = channel.call(self.startup_timeout, worker_init_request=rpc.WorkerInitRequest(
            host_version="devhost", function_app_directory=self.app_dir, worker_directory=self.app_dir,
        )).worker_init_response
        _check(init.result, self.app_dir, self.app_dir)
        channel.capabilities = dict(init.capabilities)
        metadata = channel.call(self.startup_timeout, functions_metadata_request=rpc.FunctionsMetadataRequest(
            function_app_directory=self.app_dir)).function_metadata_response
        _check(metadata.result, self.app_dir, self.app_dir)
        results = list(metadata.function_metadata_results)
        for entry in results:
            loaded = channel.call(self.startup_timeout, function_load_request=rpc.FunctionLoadRequest(
                function_id=entry.function_id, metadata=entry)).function_load_response
            _check(loaded.result, f"{self.app_dir}: function '{entry.name}'", self.app_dir)
        if self.index is None:
            self._build_index(results, HTTP_URI_CAPABILITY in channel.capabilities)

    def _build_index(self, results: list[Any], http_v2: bool) -> None:
        described = [describe_function(_MetadataFunction(entry)) for entry in results]
        self.function_ids = {entry.name: entry.function_id for entry in results}
        self.index = FunctionIndex(app_dir=self.app_dir, app=None, functions=described, http_v2=http_v2)

    def _lost(self, channel: WorkerChannel) -> None:
        """Called on the channel's reader thread when its process exits unasked: replace it."""
        with self._changed:
            group = next((g for g in (self._durable, self._functions) if channel in g), None)
            if group is not None:
                group.remove(channel)
            self._changed.notify_all()
        if self._closing or group is None:  # None: it died in its handshake, whose start tries again itself
            return
        log.warning("worker process %s exited; starting a replacement", channel.pid)
        threading.Thread(target=self._replace, args=(group,), daemon=True).start()

    def _replace(self, group: list[WorkerChannel]) -> None:
        try:
            self._spawn(group)
        except Exception:
            if not self._closing:
                log.exception("could not replace a worker process")

    def wait_until_replaced(self, pid: int, timeout: float) -> bool:
        """Block until worker `pid` is gone and every group has a live worker again (tests; False on timeout)."""
        def replaced() -> bool:
            live = [c for c in self._functions + self._durable if c.alive]
            return pid not in [c.pid for c in live] and all(
                any(c.alive for c in group) for group in (self._functions, self._durable))

        with self._changed:
            return self._changed.wait_for(replaced, timeout)

    def _pick(self, group: list[WorkerChannel]) -> WorkerChannel:
        """The least busy live worker of `group`, waiting (bounded) for a replacement when none is live."""
        with self._changed:
            live = [c for c in group if c.alive]
            if not live and not self._closing:
                self._changed.wait_for(lambda: self._closing or any(c.alive for c in group), self.startup_timeout)
                live = [c for c in group if c.alive]
        if not live:
            raise WorkerLostError("no worker process is running")
        return min(live, key=lambda c: c.in_flight)

    # ----- invocations -----

    def _invocation(self, function_name: str, bindings: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        invocation_id = str(uuid.uuid4())
        request = rpc.InvocationRequest(
            invocation_id=invocation_id, function_id=self.function_ids.get(function_name, ""),
            input_data=[rpc.ParameterBinding(name=name, data=data) for name, data in bindings.items()],
        )
        return invocation_id, {"invocation_request": request}

    async def _pick_async(self) -> WorkerChannel:
        live = [c for c in self._functions if c.alive]
        if live:
            return min(live, key=lambda c: c.in_flight)
        return await asyncio.get_running_loop().run_in_executor(None, self._pick, self._functions)

    async def _send_async(self, function_name: str, bindings: dict[str, Any]) -> Any:
        channel = await self._pick_async()
        _, content = self._invocation(function_name, bindings)
        return (await asyncio.wrap_future(channel.request(**content))).invocation_response

    async def run_activity(self, function: FunctionInfo, input_text: str | None,
                           client_binding_json: str | None = None) -> ActivityOutcome:
        bindings = {function.trigger_param: convert.activity_input(input_text)}
        if function.durable_client_param is not None and client_binding_json is not None:
            bindings[function.durable_client_param] = convert.string_binding(client_binding_json)
        try:
            response = await self._send_async(function.name, bindings)
        except WorkerLostError as exc:
            return activity_failure_text(function.name, f"{type(exc).__name__}: {exc}", "")
        return convert.activity_outcome(function.name, response)

    def _http_bindings(self, spec: HttpTriggerSpec, request: HttpRequestData, client_binding_json: str | None,
                       proxied_to: WorkerChannel | None = None) -> dict[str, Any]:
        """`proxied_to`: the HTTP v2 worker whose web server gets the request itself."""
        http = (convert.http_binding(request) if proxied_to is None
                else convert.proxied_http_binding(request, proxied_to.capabilities))
        bindings = {spec.request_param: http}
        if spec.durable_client is not None and client_binding_json is not None:
            bindings[spec.durable_client.name] = convert.string_binding(client_binding_json)
        return bindings

    async def run_http(self, spec: HttpTriggerSpec, request: HttpRequestData,
                       client_binding_json: str | None) -> HttpResponseData:
        try:
            response = await self._send_async(spec.function_name, self._http_bindings(spec, request,
                                                                                      client_binding_json))
            convert.raise_for_failure(response)
            return convert.http_response(response, spec.http_outputs)
        except (WorkerLostError, convert.WorkerInvocationError) as exc:
            raise FunctionFailedError(str(exc)) from exc

    async def serve_http_v2(self, spec: HttpTriggerSpec, request: HttpRequestData, client_binding_json: str | None,
                            connection: web.Request) -> web.StreamResponse:
        """HTTP v2 (web extension) mode as on Azure: the invocation goes over the worker protocol while the client's
        request is proxied to the web server inside the worker, whose response streams back as it is written. A client
        that leaves ends the proxying at once, as the host's proxy does: the worker's server sees the disconnect (a
        stream's generator stops) without waiting for the next write to fail."""
        channel = await self._pick_async()
        uri = channel.capabilities.get(HTTP_URI_CAPABILITY)
        if not uri:
            raise FunctionFailedError(f"the worker process {channel.pid} runs no HTTP server for HTTP v2 functions")
        invocation_id, content = self._invocation(spec.function_name,
                                                  self._http_bindings(spec, request, client_binding_json, channel))
        invocation = asyncio.wrap_future(channel.request(**content))
        headers = proxied_headers(((k, v) for k, v in connection.headers.items() if k.lower() not in _NOT_FORWARDED),
                                  request.url, connection.remote)
        headers.append((INVOCATION_ID_HEADER, invocation_id))
        proxied = _ProxiedResponse()
        exchange = asyncio.ensure_future(
            proxied.run(self._http_session(), connection, uri.rstrip("/") + connection.rel_url.raw_path_qs, headers,
                        request.body))
        gone = asyncio.ensure_future(client_gone(connection))
        try:
            await asyncio.wait({exchange, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (gone, exchange):
                if not task.done():
                    task.cancel()  # the client left (or the host stops): leaving closes the upstream request
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        if not exchange.cancelled():
            try:
                exchange.result()
            except (aiohttp.ClientError, WorkerLostError) as exc:
                invocation.cancel()
                raise FunctionFailedError(f"{type(exc).__name__}: {exc}") from exc
        try:
            answer = (await invocation).invocation_response
            if answer.result.status != rpc.StatusResult.Success:
                log.error("Executed 'Functions.%s' (Failed): %s", spec.function_name, answer.result.exception.message)
        except WorkerLostError:
            log.exception("Executed 'Functions.%s' (Failed)", spec.function_name)
        return proxied.response if proxied.response is not None else web.Response(status=499)

    def _http_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None), auto_decompress=False)
        return self._session

    # ----- orchestrators and entities (the engine bounds them by functionTimeout) -----

    async def run_orchestrator(
        self, function: FunctionInfo, trigger_json: str, previous: OrchestratorOutput | None = None
    ) -> OrchestratorOutput:
        """One episode in the orchestration worker. A crash, or a hang past `episode_timeout` (the worker is then
        killed and replaced), raises `WorkerLostError`: the engine aborts the episode and runs it again.
        `previous`: see `invoke_orchestrator`."""
        bindings = {function.trigger_param: convert.string_binding(trigger_json)}
        reply = await self._durable_call(function.name, bindings)
        return convert.orchestrator_output(reply.invocation_response, previous)

    async def run_entity_batch(self, function: FunctionInfo, batch_json: str, batch_size: int) -> BatchResult:
        """One entity batch; `EntityInternalError` or `WorkerLostError`: the engine redelivers the batch."""
        reply = await self._durable_call(function.name, {function.trigger_param: convert.string_binding(batch_json)})
        return convert.entity_result(function.name, reply.invocation_response, batch_size)

    async def _durable_call(self, name: str, bindings: dict[str, Any]) -> Any:
        loop = asyncio.get_running_loop()
        live = [c for c in self._durable if c.alive]
        channel = min(live, key=lambda c: c.in_flight) if live else await loop.run_in_executor(
            None, self._pick, self._durable)
        _, content = self._invocation(name, bindings)
        future = channel.request(**content)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.episode_timeout)
        except TimeoutError:
            await loop.run_in_executor(None, channel.kill)  # a hung episode must not hold its worker: replace it
            raise WorkerLostError(f"function '{name}' did not return within {self.episode_timeout:.0f} s; "
                                  "its worker process was stopped") from None

    async def wait_ready(self) -> None:
        """Until a worker can take a call (a replacement may be starting): a call's functionTimeout starts after."""
        if all(any(c.alive for c in group) for group in (self._functions, self._durable)) or self._closing:
            return
        await asyncio.get_running_loop().run_in_executor(None, self._wait_all_groups)

    def _wait_all_groups(self) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._closing or all(
                any(c.alive for c in group) for group in (self._functions, self._durable)), self.startup_timeout)

    async def close(self) -> None:
        self._closing = True
        with self._changed:
            self._changed.notify_all()
        if self._session is not None:
            await self._session.close()
        channels = self._functions + self._durable
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(None, c.stop) for c in channels), return_exceptions=True)
        with contextlib.suppress(OSError):  # wakes the acceptor blocked in accept()
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        if self._acceptor.is_alive():
            await loop.run_in_executor(None, self._acceptor.join, 5.0)


class _ProxiedResponse:
    """One proxied exchange: the request to the worker's HTTP server, its response streamed to the client as it comes.
    `response`: the client's response once prepared (a cancelled exchange may have started it)."""

    response: web.StreamResponse | None = None

    async def run(self, session: aiohttp.ClientSession, connection: web.Request, url: str,
                  headers: list[tuple[str, str]], body: bytes | None) -> None:
        async with session.request(connection.method, url, headers=headers, data=body,
                                   allow_redirects=False) as upstream:
            reply_headers: CIMultiDict[str] = CIMultiDict(
                (k, v) for k, v in upstream.headers.items() if k.lower() not in _NOT_FORWARDED)
            self.response = web.StreamResponse(status=upstream.status, headers=reply_headers)
            await self.response.prepare(connection)
            async for chunk in upstream.content.iter_any():
                if not await _to_client(self.response, chunk):
                    return  # the client left: leaving closes the upstream request, the function sees the disconnect
            await _to_client(self.response, None)


async def _to_client(response: web.StreamResponse, chunk: bytes | None) -> bool:
    """Write a chunk of a proxied response (None: its end) to the client; False when the client has left. A client
    leaving is not the function failing (its result is the worker's answer), as in-process (`streaming.send_live`)."""
    try:
        if chunk is None:
            await response.write_eof()
        else:
            await response.write(chunk)
    except ConnectionError:  # aiohttp's ClientConnectionResetError("Cannot write to closing transport") is one
        return False
    return True


_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def _check(result: Any, where: str, app_dir: str) -> None:
    """A failed init/metadata/load: the worker's message, after the innermost frame of its stack trace in the app's
    own files (the user's file and line, which the Functions host logs with the stack)."""
    if result.status == rpc.StatusResult.Success:
        return
    frames = [f for f in _FRAME.findall(result.exception.stack_trace or "") if f[0].startswith(app_dir + os.sep)]
    at = f": indexing failed at {frames[-1][0]}:{frames[-1][1]}" if frames else ""
    raise AppLoadError(f"{where}{at}: {result.exception.message}")
