"""`InProcessHost`: the app, its engine and its HTTP server in the test process, on a background loop thread."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, Literal, Self, TypeVar

import httpx

from devhost.engine.api import Clock, DurableEngine, EngineOptions, RealClock, RuntimeStatus, VirtualClock
from devhost.host import DevHost

from ._common import DEFAULT_WAIT_SECONDS, DEVHOST_DIR, StatusNames, loopback_client, status_names

T = TypeVar("T")
ClockMode = Literal["virtual", "auto-skip", "real"]


class _EnvPatch:
    """Set variables for the host's lifetime and restore the environment afterwards (local.settings.json included)."""

    def __init__(self, overrides: Mapping[str, str] | None) -> None:
        self._saved = dict(os.environ)
        os.environ.update({k: str(v) for k, v in (overrides or {}).items()})

    def restore(self) -> None:
        os.environ.clear()
        os.environ.update(self._saved)


def _installed(path: Path) -> bool:
    """A module installed into an environment (`.venv/lib/.../site-packages`), not the app's own code. Forgetting one
    would import it a second time: two copies of e.g. httpcore, whose exceptions then match neither's classes."""
    return "site-packages" in path.parts or "dist-packages" in path.parts


class _AppModules:
    """Modules of the app directory first imported by this host; forgotten at stop so that the next host imports
    them again and sees its own environment (settings read at import time do not leak between tests)."""

    def __init__(self, app_dir: Path) -> None:
        self._app_dir = app_dir.resolve()
        self._before = set(sys.modules)

    def forget(self) -> None:
        for name in set(sys.modules) - self._before:
            module_file = getattr(sys.modules.get(name), "__file__", None)
            if not module_file:
                continue
            path = Path(module_file).resolve()
            if _installed(path):
                continue  # a library, even one in a virtual environment inside the app dir: imported once per process
            if path.is_relative_to(self._app_dir) and not path.is_relative_to(DEVHOST_DIR):
                sys.modules.pop(name, None)
                self._detach_from_parent(name)

    @staticmethod
    def _detach_from_parent(name: str) -> None:
        """A forgotten `a.b` must not stay reachable as attribute `b` of a package `a` that is kept: the next
        `from a import b` would return the old module instead of importing it again."""
        parent_name, _, child = name.rpartition(".")
        parent = sys.modules.get(parent_name) if parent_name else None
        if parent is not None and getattr(parent, child, None) is not None:
            delattr(parent, child)


class _LoopThread:
    """An event loop running forever on a daemon thread; `call` runs a coroutine there and waits for its result."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        async def cancel_rest() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            self.call(cancel_rest(), timeout=10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)
            if not self._thread.is_alive():
                self.loop.close()


class InProcessHost:
    """The app, its engine and its HTTP server in this process, on a background loop thread and a free port.

    `clock`: "virtual" (default; time moves only with `advance` / `wait_until_idle(skip_timers=True)`), "auto-skip"
    (virtual, jumps to the next timer whenever idle), or "real". `env` is applied before the app is imported and the
    whole environment (including `local.settings.json` values the loader adds) is restored by `stop()`, which also
    forgets the app-directory modules this host imported (the next host re-imports them under its own environment;
    `fresh_imports=False` keeps them). `workers`: run activity and HTTP functions in that many worker processes
    (see `DevHost.start`; None reads FUNCTIONS_WORKER_PROCESS_COUNT, default 0 = in this process). `function_keys`: a
    keys file: HTTP triggers then need their authLevel's key (devhost.http.keys).
    """

    def __init__(
        self,
        app_dir: str | os.PathLike[str],
        *,
        clock: ClockMode = "virtual",
        state_path: str | os.PathLike[str] = ":memory:",
        env: Mapping[str, str] | None = None,
        options: EngineOptions | None = None,
        port: int = 0,
        fresh_imports: bool = True,
        workers: int | None = None,
        worker: str | None = None,
        function_keys: str | os.PathLike[str] | None = None,
    ) -> None:
        self.app_dir = Path(app_dir)
        self.function_keys = function_keys
        self.clock_mode = clock
        self.state_path = str(state_path)
        self.env = dict(env or {})
        self.options = options
        self.port = port
        self.fresh_imports = fresh_imports
        self.workers = workers
        self.worker = worker  # "runtime" / "inprocess" / "auto"; None reads DEVHOST_WORKER (see DevHost.start)
        self._loop_thread: _LoopThread | None = None
        self._host: DevHost | None = None
        self._env: _EnvPatch | None = None
        self._modules: _AppModules | None = None
        self._client: httpx.Client | None = None

    def _make_clock(self) -> Clock:
        if self.clock_mode == "real":
            return RealClock()
        return VirtualClock(auto_skip=self.clock_mode == "auto-skip")

    def start(self) -> Self:
        self._env = _EnvPatch(self.env)
        self._modules = _AppModules(self.app_dir) if self.fresh_imports else None
        self._loop_thread = _LoopThread(f"devhost-{self.app_dir.name}")
        try:
            self._host = self._loop_thread.call(
                DevHost.start(
                    self.app_dir, port=self.port, state_path=self.state_path, clock=self._make_clock(),
                    options=self.options, workers=self.workers, worker=self.worker,
                    function_keys=str(self.function_keys) if self.function_keys is not None else None,
                ),
                timeout=180,  # the real worker's processes import the app before it serves
            )
        except BaseException:
            self._loop_thread.close()
            self._env.restore()
            if self._modules is not None:
                self._modules.forget()
            raise
        self._client = loopback_client(self._host.base_url)
        return self

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        try:
            if self._host is not None and self._loop_thread is not None:
                self._loop_thread.call(self._host.stop(), timeout=60)
        finally:
            self._host = None
            if self._loop_thread is not None:
                self._loop_thread.close()
                self._loop_thread = None
            if self._env is not None:
                self._env.restore()
                self._env = None
            if self._modules is not None:
                self._modules.forget()
                self._modules = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----- access -----

    @property
    def host(self) -> DevHost:
        if self._host is None:
            raise RuntimeError("the host is not running")
        return self._host

    @property
    def engine(self) -> DurableEngine:
        return self.host.engine

    @property
    def clock(self) -> Clock:
        return self.engine.clock

    @property
    def base_url(self) -> str:
        return self.host.base_url

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            raise RuntimeError("the host is not running")
        return self._client

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 60) -> T:
        """Run a coroutine on the host's loop (engine methods must be awaited there) and return its result."""
        if self._loop_thread is None:
            raise RuntimeError("the host is not running")
        return self._loop_thread.call(coro, timeout)

    # ----- waiting and time -----

    def get_status(self, instance_id: str, *, show_history: bool = False) -> dict[str, Any] | None:
        status = self.run(self.engine.get_status(instance_id, show_history=show_history))
        return status.to_json() if status is not None else None

    def wait_for_status(
        self, instance_id: str, statuses: StatusNames | None = None, timeout: float = DEFAULT_WAIT_SECONDS
    ) -> dict[str, Any]:
        """Block until the instance reaches one of `statuses` (default: any terminal one); returns the status JSON.

        Raises TimeoutError. Event-driven on the engine: no polling, no sleeping.
        """
        wanted = {RuntimeStatus(s) for s in status_names(statuses)}
        status = self.run(self.engine.wait_for_status(instance_id, wanted, timeout), timeout=timeout + 5)
        return status.to_json()

    def wait_until_idle(self, timeout: float = DEFAULT_WAIT_SECONDS, *, skip_timers: bool = False) -> None:
        """Block until nothing is runnable; `skip_timers=True` also fires every pending timer (virtual clock)."""
        self.run(self.engine.run_until_idle(timeout, skip_timers=skip_timers), timeout=timeout + 5)

    def advance(self, seconds: float) -> None:
        """Virtual clock: move time forward by `seconds`, then run until idle."""
        self.run(self.engine.advance(seconds))
