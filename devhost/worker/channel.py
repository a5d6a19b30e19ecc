"""One real-worker process and its connection, usable from the host's loop and from its threads alike.

Requests carry a `request_id`; the worker answers each when it is done, in any order. A reader thread resolves the
waiting future, so an async caller awaits it (`asyncio.wrap_future`) while a blocking caller (an orchestrator
episode runs synchronously on the engine's loop) waits with a timeout. When the process exits, every call in
flight fails with `WorkerLostError` and `on_lost` tells the pool to replace it.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from devhost import workers
from devhost.worker import rpc
from devhost.worker.logs import emit_in_host
from devhost.worker.wire import WireError, encode, read_message

log = logging.getLogger("devhost.worker")
STOP_GRACE_SECONDS = 5.0


class WorkerLostError(workers.WorkerLostError):
    """The worker process running a call exited (or was stopped) before answering (the engine retries episodes and
    entity batches on devhost's `WorkerLostError`, whichever pool raised it)."""


class WorkerChannel:
    def __init__(self, process: subprocess.Popen[bytes], sock: socket.socket,
                 on_lost: Callable[[WorkerChannel], None]) -> None:
        self.process = process
        self.sock = sock
        self.capabilities: dict[str, str] = {}
        self._on_lost = on_lost
        self._ids = itertools.count(1)
        self._pending: dict[str, Future[Any]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._reader = threading.Thread(target=self._read, name=f"devhost-worker-{process.pid}", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return not self._closed and self.process.poll() is None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def request(self, **content: Any) -> Future[Any]:
        """Send one `StreamingMessage` with `content`; the future holds the worker's reply message."""
        future: Future[Any] = Future()
        request_id = str(next(self._ids))
        message = rpc.StreamingMessage(request_id=request_id, **content)
        with self._lock:
            if self._closed:
                future.set_exception(WorkerLostError(f"the worker process {self.pid} is gone"))
                return future
            self._pending[request_id] = future
            try:
                self.sock.sendall(encode(message))
            except OSError as exc:
                self._pending.pop(request_id, None)
                future.set_exception(WorkerLostError(f"the worker process {self.pid} is gone: {exc}"))
        return future

    def call(self, timeout: float, **content: Any) -> Any:
        """Blocking `request`: the reply, `TimeoutError` after `timeout` s, or `WorkerLostError`."""
        return self.request(**content).result(timeout)

    def _read(self) -> None:
        try:
            while (message := read_message(self.sock)) is not None:
                if message.WhichOneof("content") == "rpc_log":  # unsolicited: the app logged something
                    emit_in_host(message.rpc_log, self.pid)
                    continue
                with self._lock:
                    future = self._pending.pop(message.request_id, None)
                if future is not None and not future.done():
                    future.set_result(message)
        except WireError:
            log.exception("worker %s sent an invalid frame; stopping it", self.pid)
            self.process.kill()
        code = self.process.wait()
        with self._lock:
            was_closed = self._closed
            self._closed = True
            pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(WorkerLostError(f"the worker process {self.pid} exited with code {code}"))
        if not was_closed:
            self._on_lost(self)

    def kill(self) -> None:
        """End a hung worker now (its calls fail; the pool replaces it). Returns once it is gone, so the next pick
        never chooses it."""
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        """Ask the worker to leave, then make sure it did."""
        with self._lock:
            already = self._closed
            self._closed = True
        if not already:
            with contextlib.suppress(OSError):
                self.sock.sendall(encode(rpc.StreamingMessage(worker_terminate=rpc.WorkerTerminate())))
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        try:
            self.process.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(STOP_GRACE_SECONDS)
