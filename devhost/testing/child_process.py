"""`SubprocessHost`: `python -m devhost` in a child process on a free port with a state file, stopped by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

import httpx

from ._common import (
    DEFAULT_WAIT_SECONDS,
    PACKAGE_ROOT,
    STATUS_PATH,
    HostStartError,
    StatusNames,
    free_port,
    loopback_client,
    status_names,
)
from .inprocess import ClockMode


class SubprocessHost:
    """`python -m devhost` in a child process on a free port with a persistent state file; stop by PID.

    `kill()` sends SIGKILL (no cleanup, like a crash); `start()` again reuses the same port and state file.
    `clock`: "real" (default), "virtual" (moved by `advance`) or "auto-skip" (jumps to the next timer when idle).
    `workers`: `--workers N` (activity and HTTP functions in N worker processes); None leaves it to the setting.
    `python`: the interpreter that runs devhost (default: this one), e.g. a virtual environment's holding only the
    app's requirements; `devhost_path`: the folder put on its PYTHONPATH so `devhost` imports (default: this
    repository's root).
    """

    def __init__(
        self,
        app_dir: str | os.PathLike[str],
        *,
        state_path: str | os.PathLike[str],
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        clock: ClockMode = "real",
        log_path: str | os.PathLike[str] | None = None,
        startup_timeout: float = 30.0,
        workers: int | None = None,
        python: str | os.PathLike[str] | None = None,
        devhost_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.app_dir = Path(app_dir).resolve()
        self.python = str(python or sys.executable)
        self.devhost_path = str(devhost_path or PACKAGE_ROOT)
        self.state_path = str(state_path)
        self.port = port or free_port()
        self.env = dict(env or {})
        self.clock_mode = clock
        self.log_path = Path(log_path) if log_path else Path(self.state_path).with_suffix(".log")
        self.startup_timeout = startup_timeout
        self.workers = workers
        self.process: subprocess.Popen[bytes] | None = None
        self._client: httpx.Client | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            self._client = loopback_client(self.base_url)
        return self._client

    def command(self) -> list[str]:
        workers = [] if self.workers is None else ["--workers", str(self.workers)]
        return [self.python, "-m", "devhost", "--app-dir", str(self.app_dir), "--port", str(self.port),
                "--state", self.state_path, "--clock", self.clock_mode, *workers]

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> Self:
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"devhost is already running (pid {self.process.pid})")
        env = {**os.environ, **self.env}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (self.devhost_path, env.get("PYTHONPATH")) if p)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            # A process group of its own: `kill` takes the host's worker processes with it.
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                            cwd=self.app_dir, start_new_session=True)
        self._wait_ready(self.process)
        return self

    def _wait_ready(self, process: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise HostStartError(f"devhost exited with code {process.returncode}:\n{self.output()}")
            try:
                if self.client.get("/admin/host/status", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.02)
        self.kill()
        raise HostStartError(f"devhost did not become ready within {self.startup_timeout}s:\n{self.output()}")

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (graceful), then SIGKILL if it does not exit in `timeout`; returns the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                _kill_instance(self.process)
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL to the host and its worker processes: the instance dies mid-flight, exactly like a crash on Azure,
        where the workers die with the host. (An orphaned worker would go on with its invocation in flight and could
        store what the crash was meant to lose.) Returns once every process of the instance has exited."""
        if self.process is not None and self.process.poll() is None:
            _kill_instance(self.process)

    def close(self) -> None:
        self.stop()
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- waiting and time (over HTTP) -----

    def get_status(self, instance_id: str, *, show_history: bool = False) -> dict[str, Any] | None:
        params = {"showHistory": "true"} if show_history else {}
        response = self.client.get(STATUS_PATH.format(instance_id), params=params)
        return None if response.status_code == 404 else response.json()

    def wait_for_status(
        self, instance_id: str, statuses: StatusNames | None = None, timeout: float = DEFAULT_WAIT_SECONDS
    ) -> dict[str, Any]:
        """Poll the status webhook until one of `statuses` (default: terminal); raises TimeoutError at `timeout`."""
        wanted = status_names(statuses)
        deadline = time.monotonic() + timeout
        last: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            last = self.get_status(instance_id)
            if last is not None and last["runtimeStatus"] in wanted:
                return last
            time.sleep(0.02)
        raise TimeoutError(f"instance {instance_id} did not reach {sorted(wanted)} in {timeout}s; last: {last}")

    def wait_until_idle(self, timeout: float = DEFAULT_WAIT_SECONDS, *, skip_timers: bool = False) -> None:
        params = {"timeout": str(timeout), "skipTimers": str(skip_timers).lower()}
        response = self.client.post("/admin/devhost/idle", params=params, timeout=timeout + 5)
        if response.status_code == 504:
            raise TimeoutError(f"devhost did not become idle in {timeout}s")
        response.raise_for_status()

    def advance(self, seconds: float) -> None:
        """Only with `clock="virtual"` (or "auto-skip"): move time, then run until idle."""
        self.client.post("/admin/devhost/advance", params={"seconds": str(seconds)}).raise_for_status()


def _group_members(group: int) -> list[int]:
    """The live processes of a process group (zombies excluded), from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            state, _ppid, pgrp = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[:3]
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        if int(pgrp) == group and state != "Z":
            members.append(int(entry))
    return members


def _wait_until_exited(group: int, timeout: float = 10.0) -> None:
    """Bounded: SIGKILL cannot be refused, so only a machine that stalls makes this wait; a process still there
    after it is a leak, said loudly."""
    deadline = time.monotonic() + timeout
    while members := _group_members(group):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {members} of the killed devhost instance are still running")
        time.sleep(0.01)


def _kill_instance(host: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the host's process group (it leads its own: `SubprocessHost.start`), then wait for all of it."""
    os.killpg(host.pid, signal.SIGKILL)
    host.wait()
    _wait_until_exited(host.pid)
