"""The Python worker's sync thread pool (`PYTHON_THREADPOOL_THREAD_COUNT` threads), as devhost runs it.

An `Executor` like `ThreadPoolExecutor` (threads started as calls need them, up to the limit; `submit` gives a
concurrent future), plus `run_soon(loop, fn, *args)`: the call's outcome goes to an asyncio future with one
`call_soon_threadsafe`. `loop.run_in_executor` on a `ThreadPoolExecutor` builds a concurrent future (a condition and
its lock), chains it to an asyncio one, and both threads take those locks several times per call: per orchestrator
episode that cost more than 2.5x the hop itself.

The threads are daemon threads: like the worker's at host shutdown, a sync function still running when the process
exits does not keep it alive.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

T = TypeVar("T")


class _Call:
    """A `submit`: its outcome goes to a concurrent future."""

    __slots__ = ("args", "fn", "future", "kwargs")

    def __init__(self, future: Future[Any], fn: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self.future, self.fn, self.args, self.kwargs = future, fn, args, kwargs

    def run(self) -> None:
        if not self.future.set_running_or_notify_cancel():
            return
        try:
            result = self.fn(*self.args, **self.kwargs)
        except BaseException as exc:  # handed to whoever waits, as ThreadPoolExecutor does
            self.future.set_exception(exc)
        else:
            self.future.set_result(result)

    def cancel(self) -> None:
        self.future.cancel()


class LoopCall:
    """A `run_soon`: its outcome goes to an asyncio future, settled on its loop."""

    __slots__ = ("args", "fn", "future", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], fn: Callable[..., Any],
                 args: tuple[Any, ...]) -> None:
        self.loop, self.future, self.fn, self.args = loop, future, fn, args

    def run(self) -> None:
        if self.future.cancelled():  # cancelled before a thread took it (a timeout): never runs
            return
        try:
            result = self.fn(*self.args)
        except BaseException as exc:  # handed to the awaiting task
            self._settle(exc, failed=True)
        else:
            self._settle(result, failed=False)

    def _settle(self, value: Any, *, failed: bool) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(_set_outcome, self.future, value, failed)

    def cancel(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.future.cancel)


def _set_outcome(future: asyncio.Future[Any], value: Any, failed: bool) -> None:
    if future.done():  # (cancelled meanwhile: a timeout)
        return
    if not failed:
        future.set_result(value)
    elif isinstance(value, StopIteration):  # a future refuses it (it would end the awaiting coroutine)
        future.set_exception(RuntimeError(f"{type(value).__name__}: {value}"))
    else:
        future.set_exception(value)


class SyncThreadPool(Executor):
    def __init__(self, max_workers: int, thread_name_prefix: str) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be greater than 0")
        self.max_workers = max_workers
        self._prefix = thread_name_prefix
        self._queue: queue.SimpleQueue[_Call | LoopCall | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0  # threads waiting for a call, less the calls queued for them
        self._shutdown = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        self._put(_Call(future, fn, args, kwargs))
        return future

    def run_soon(self, loop: asyncio.AbstractEventLoop, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """`fn(*args)` on a pool thread; its result (or exception) on `loop`'s future."""
        future: asyncio.Future[T] = loop.create_future()
        self._put(LoopCall(loop, future, fn, args))
        return future

    def _put(self, call: _Call | LoopCall) -> None:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if self._idle:
                self._idle -= 1
            elif len(self._threads) < self.max_workers:
                thread = threading.Thread(target=self._work, name=f"{self._prefix}_{len(self._threads)}",
                                          daemon=True)
                self._threads.append(thread)
                thread.start()
        self._queue.put(call)

    def _work(self) -> None:
        while True:
            call = self._queue.get()
            if call is None:  # shutdown
                return
            call.run()
            del call  # (its arguments and result are not kept alive while the thread waits)
            with self._lock:
                self._idle += 1

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            threads = list(self._threads)
        if cancel_futures:
            while True:
                try:
                    call = self._queue.get_nowait()
                except queue.Empty:
                    break
                if call is not None:
                    call.cancel()
        for _ in threads:
            self._queue.put(None)
        if wait:
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join()
