"""The host side of worker processes: start them, send them activity and HTTP calls, replace any that die.

Orchestrator episodes and entity batches go to the workers too (as on Azure, where the worker runs every function): a
worker that hangs or dies in user code costs a worker restart and a retried episode or batch, never the host.

The Azure analogue is `FUNCTIONS_WORKER_PROCESS_COUNT`: the Functions host spreads invocations over several Python
worker processes so that one app uses more than one core. Each call goes to the worker with the fewest calls in
flight. A worker that exits mid-call fails that call the way the Functions host does (an activity fails with the
exit in its reason, so the orchestration's retry policy decides; an HTTP request gets 500) and is replaced.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import logging
import os
import secrets
import sys
from pathlib import Path
from typing import TypeVar

from devhost.app_loader import FunctionInfo
from devhost.execution import FunctionFailedError
from devhost.http.conversion import HttpRequestData, HttpResponseData
from devhost.http.trigger import HttpTriggerSpec
from devhost.invoke import ActivityOutcome, activity_failure
from devhost.protocol.actions import OrchestratorOutput
from devhost.protocol.entity_messages import BatchResult, EntityInternalError

from .messages import (
    ActivityCall,
    ActivityDone,
    EntityCall,
    EntityDone,
    Frame,
    FrameError,
    Hello,
    HttpCall,
    HttpDone,
    OrchestratorCall,
    OrchestratorDone,
    encode_frame,
    read_frame,
)
from .worker import TOKEN_VARIABLE

log = logging.getLogger("devhost.workers")

# The directory that holds the `devhost` package: workers import it whatever the app directory is.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
STOP_GRACE_SECONDS = 5.0
AnswerT = TypeVar("AnswerT", ActivityDone, HttpDone, OrchestratorDone, EntityDone)
Call = ActivityCall | HttpCall | OrchestratorCall | EntityCall


class WorkerStartError(RuntimeError):
    """A worker process could not start (the app failed to load in it, or it never connected)."""


class WorkerLostError(Exception):
    """The worker process running a call exited before answering."""


class _Worker:
    """One worker process and its connection; `call` sends a frame and waits for the answer with the same id."""

    def __init__(self, process: asyncio.subprocess.Process, token: str) -> None:
        self.process = process
        self.token = token  # this worker's own secret: its Hello names it
        self.killed = False
        self.connected: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.pending: dict[int, asyncio.Future[Frame]] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return (self.connected.done() and not self.connected.exception() and self.process.returncode is None
                and not self.killed)

    def attach(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._reader_task = asyncio.create_task(self._read(reader), name=f"devhost-worker-{self.process.pid}")
        self.connected.set_result(None)

    async def call(self, frame: Call, answer_type: type[AnswerT]) -> AnswerT:
        """Send `frame` and wait for the worker's answer, which must be an `answer_type` (`FrameError` if not)."""
        if self._writer is None:
            raise WorkerLostError(f"the worker process {self.process.pid} has not connected")
        answer: asyncio.Future[Frame] = asyncio.get_running_loop().create_future()
        self.pending[frame.id] = answer
        try:
            self._writer.write(encode_frame(frame))
            done = await answer
        except asyncio.CancelledError:
            # The host gave up on the call (functionTimeout): like the Functions host, restart the worker running it.
            if self.process.returncode is None:
                self.killed = True  # no new calls for it while it dies
                self.process.kill()
            raise
        finally:
            self.pending.pop(frame.id, None)
        if not isinstance(done, answer_type):
            raise FrameError(f"worker {self.process.pid} answered {frame.type} {frame.id} with a {done.type} frame")
        return done

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while (frame := await read_frame(reader)) is not None:
                answer = self.pending.get(getattr(frame, "id", -1))
                if answer is not None and not answer.done():
                    answer.set_result(frame)
        except FrameError:
            log.exception("worker %s sent an invalid frame; dropping it", self.process.pid)
            self.process.kill()
        code = await self.process.wait()
        for answer in self.pending.values():
            if not answer.done():
                answer.set_exception(WorkerLostError(f"the worker process {self.process.pid} exited with code {code}"))

    async def stop(self) -> None:
        if self._writer is not None:
            self._writer.close()  # the worker leaves when its connection closes
        try:
            await asyncio.wait_for(self.process.wait(), STOP_GRACE_SECONDS)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        if self._reader_task is not None:
            await asyncio.gather(self._reader_task, return_exceptions=True)


class WorkerPool:
    """`await WorkerPool.start(app_dir, count)`; implements `devhost.execution.FunctionExecutor`."""

    def __init__(self, app_dir: str, count: int, startup_timeout: float, log_level: str) -> None:
        self.app_dir = app_dir
        self.count = count
        self.startup_timeout = startup_timeout
        self.log_level = log_level
        self._ids = itertools.count(1)
        self._workers: list[_Worker] = []
        self._server: asyncio.Server | None = None
        self._address = ""
        self._closing = False
        self._changed = asyncio.Event()
        self._starting = 0
        self._watchers: set[asyncio.Task[None]] = set()

    @classmethod
    async def start(cls, app_dir: str, count: int, *, startup_timeout: float = 60.0,
                    log_level: str = "INFO") -> WorkerPool:
        if count < 1:
            raise ValueError("a worker pool needs at least one worker")
        pool = cls(app_dir, count, startup_timeout, log_level)
        pool._server = await asyncio.start_server(pool._on_connect, "127.0.0.1", 0)
        host, port = pool._server.sockets[0].getsockname()[:2]
        pool._address = f"{host}:{port}"
        try:
            await asyncio.gather(*(pool._spawn() for _ in range(count)))
        except BaseException:
            await pool.close()
            raise
        return pool

    @property
    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if w.alive]

    # ----- FunctionExecutor -----

    async def run_activity(
        self, function: FunctionInfo, input_text: str | None, client_binding_json: str | None = None
    ) -> ActivityOutcome:
        call = ActivityCall(id=next(self._ids), function=function.name, input=input_text,
                            client_binding=client_binding_json)
        try:
            done = await self._call(call, ActivityDone)
        except WorkerLostError as exc:
            return activity_failure(function.name, exc)
        return done.outcome

    async def run_orchestrator(
        self, function: FunctionInfo, trigger_json: str, previous: OrchestratorOutput | None = None
    ) -> OrchestratorOutput:
        """One episode in a worker process (raises `WorkerLostError` if the process dies: the episode is retried).
        The output is parsed there, so `previous` (see `invoke_orchestrator`) does not apply."""
        call = OrchestratorCall(id=next(self._ids), function=function.name, trigger=trigger_json)
        return (await self._call(call, OrchestratorDone)).output

    async def run_entity_batch(self, function: FunctionInfo, batch_json: str, batch_size: int) -> BatchResult:
        """One entity batch in a worker process; EntityInternalError (or WorkerLostError): the batch is redelivered."""
        call = EntityCall(id=next(self._ids), function=function.name, batch=batch_json, size=batch_size)
        done = await self._call(call, EntityDone)
        if done.result is None:
            raise EntityInternalError(done.internal_error or "the entity batch failed")
        return done.result

    async def run_http(
        self, spec: HttpTriggerSpec, request: HttpRequestData, client_binding_json: str | None
    ) -> HttpResponseData:
        call = HttpCall(id=next(self._ids), function=spec.function_name, request=request,
                        client_binding=client_binding_json)
        try:
            done = await self._call(call, HttpDone)
        except WorkerLostError as exc:
            raise FunctionFailedError(f"{type(exc).__name__}: {exc}") from exc
        if done.response is None:
            raise FunctionFailedError(done.error or "the function failed")
        return done.response

    async def close(self) -> None:
        self._closing = True
        if self._server is not None:
            self._server.close()
        await asyncio.gather(*(w.stop() for w in self._workers), return_exceptions=True)
        for watcher in self._watchers:
            watcher.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)

    async def wait_ready(self) -> None:
        """Until a worker can take a call (a replacement may be starting): a call's functionTimeout starts after."""
        while not any(w.alive for w in self._workers) and not self._closing and self._replacing:
            self._changed.clear()
            await self._changed.wait()

    # ----- internals -----

    @property
    def _replacing(self) -> bool:
        """A worker is starting, or one was killed and its watcher will start a replacement."""
        return self._starting > 0 or any(w.killed for w in self._workers)

    async def _call(self, frame: Call, answer_type: type[AnswerT]) -> AnswerT:
        while True:
            live = [w for w in self._workers if w.alive]
            if live:
                return await min(live, key=lambda w: len(w.pending)).call(frame, answer_type)
            if self._closing or not self._replacing:
                raise WorkerLostError("no worker process is running")
            self._changed.clear()
            await self._changed.wait()  # a replacement worker is starting

    async def _spawn(self) -> None:
        self._starting += 1
        try:
            await self._start_worker()
        finally:
            self._starting -= 1
            self._changed.set()

    async def _start_worker(self) -> None:
        token = secrets.token_hex(16)
        # Like Azure, the workers see how many of them there are (an app can refuse per-process state).
        env = {**os.environ, TOKEN_VARIABLE: token, "FUNCTIONS_WORKER_PROCESS_COUNT": str(self.count)}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "devhost.workers", "--app-dir", self.app_dir, "--connect", self._address,
            "--log-level", self.log_level, env=env, cwd=self.app_dir,
        )
        worker = _Worker(process, token)
        self._workers.append(worker)
        exited = asyncio.ensure_future(process.wait())
        done, _ = await asyncio.wait({worker.connected, exited}, timeout=self.startup_timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if worker.connected not in done:
            exited.cancel()
            self._workers.remove(worker)
            if process.returncode is None:
                process.kill()
                await process.wait()
                raise WorkerStartError(f"a worker process did not connect within {self.startup_timeout:.0f} s")
            raise WorkerStartError(f"a worker process exited with code {process.returncode} while loading the app "
                                   "(its error is in the output above)")
        watcher = asyncio.create_task(self._watch(worker, exited))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        log.info("worker process %s ready", process.pid)

    async def _watch(self, worker: _Worker, exited: asyncio.Future[int]) -> None:
        code = await exited
        if self._closing:
            return
        log.warning("worker process %s exited with code %s; starting a replacement", worker.process.pid, code)
        self._workers.remove(worker)
        try:
            await self._spawn()
        except WorkerStartError:
            log.exception("could not replace worker process %s", worker.process.pid)

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            hello = await asyncio.wait_for(read_frame(reader), self.startup_timeout)
        except (TimeoutError, FrameError):
            hello = None
        worker = None
        if isinstance(hello, Hello):
            worker = next((w for w in self._workers
                           if not w.connected.done() and hmac.compare_digest(hello.token, w.token)), None)
        if worker is None:
            writer.close()  # not one of ours
            return
        worker.attach(reader, writer)
