"""Where a durable run's CPU goes: devhost's engine, the Durable SDK, the app's orchestrator, activities, HTTP.

A sampling profiler (stdlib only): a thread reads every other thread's stack (`sys._current_frames`) every
`interval` seconds. A sample whose innermost frame is a wait (select, a lock, a queue) is idle and dropped; a busy one
is charged to the innermost frame that has an owner: the app's orchestrator (`orchestrators/`), activities
(`activities/`), HTTP handlers (`http_api/`), the Durable SDK (`azure/durable_functions/`), devhost's engine
(`devhost/engine/`, `devhost/protocol/`), devhost's host (the rest of `devhost/`: HTTP server, invocation), the asyncio
loop (the loop thread's runner, `devhost/testing/`), the model client's SDK stack (openai, httpx: what the in-process
runner spends too), the scripted model server (`scripted_model/`, the benchmark's model: not overhead). Other
library frames (pydantic, sqlite3, json...) and the app's shared packages (`agent_runs/`, `agent_runtime/`,
`session_store/`, `telemetry/`...) are charged to the owner that called them. Busy samples split the process CPU time
measured over the same span (`time.process_time`), so the parts add up to what the process spent.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

OWNERS = (
    ("/scripted_model/", "model server"),
    # The model call's own client stack (the in-process runner spends the same): apart from the app's code.
    ("/site-packages/openai/", "model client (openai SDK, httpx)"),
    ("/site-packages/httpx2/", "model client (openai SDK, httpx)"),
    ("/site-packages/httpcore2/", "model client (openai SDK, httpx)"),
    ("/site-packages/h11/", "model client (openai SDK, httpx)"),
    ("/orchestrators/", "app: orchestrator"),
    ("/activities/", "app: activities"),
    ("/http_api/", "app: HTTP"),
    ("/azure/durable_functions/", "Durable SDK"),
    # devhost in three parts: its Durable engine (what the Durable extension + storage do on Azure), its host
    # (HTTP server, function invocation: the Functions host and worker's part), and the asyncio loop itself (the
    # loop thread's outermost frame is devhost's runner: scheduling, callbacks, thread wake-ups of every owner).
    ("/devhost/engine/", "devhost engine"),
    ("/devhost/protocol/", "devhost engine"),
    ("/devhost/testing/", "event loop (asyncio)"),
    ("/devhost/", "devhost host (HTTP, invocation)"),
)
# The app's shared packages: charged to the orchestrator, activity or handler that called them.
SHARED = ("/agent_runs/", "/agent_runtime/", "/session_store/", "/telemetry/", "/durable_steps/", "/served_agents/",
          "/bench/workload/", "/workflow_runtime/")
IDLE = {("selectors.py", "select"), ("threading.py", "wait"), ("queue.py", "get"), ("thread.py", "_worker"),
        ("threading.py", "_wait_for_tstate_lock"), ("socketserver.py", "serve_forever"), ("ssl.py", "read"),
        ("socket.py", "readinto"), ("base_events.py", "_run_once"), ("sync_pool.py", "_work")}


def owner_of(frame: FrameType | None) -> str | None:
    """The owner of a stack (innermost frame first), or None when the thread is waiting."""
    if frame is None:
        return None
    code = frame.f_code
    if (code.co_filename.rsplit("/", 1)[-1], code.co_name) in IDLE:
        return None
    return stack_owner(frame)


def stack_owner(frame: FrameType | None) -> str:
    """The owner a stack's work is charged to: its innermost frame that has one (`OWNERS`); else the app's shared
    packages' caller ("app: other") or "other"."""
    shared = False
    while frame is not None:
        path = frame.f_code.co_filename
        for marker, owner in OWNERS:
            if marker in path:
                return owner
        shared = shared or any(marker in path for marker in SHARED)
        frame = frame.f_back
    return "app: other" if shared else "other"


class Sampler:
    def __init__(self, interval: float = 0.0005) -> None:
        self.interval = interval
        self.samples: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)
        self.cpu_seconds = 0.0
        self._own_cpu = 0.0

    def _run(self) -> None:
        me, main = threading.get_ident(), threading.main_thread().ident
        while not self._stop.wait(self.interval):
            for ident, frame in sys._current_frames().items():
                if ident in (me, main):  # the sampler, and the benchmark's client waiting on the engine
                    continue
                owner = owner_of(frame)
                if owner is not None:
                    self.samples[owner] += 1
        self._own_cpu = time.thread_time()

    @contextmanager
    def running(self) -> Iterator[Sampler]:
        started, client_started = time.process_time(), time.thread_time()
        # The sampler needs the GIL to look, and a thread running pure Python only lets go of it every switch
        # interval (5 ms): with the default, samples fell almost only on threads blocked in I/O (sqlite, sockets),
        # and a ~1 ms orchestrator episode on the sync thread was never seen. A short interval makes samples land
        # where the CPU time is (and costs some of it: compare shares, not totals, with other runs).
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, self.interval / 5))
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()
            sys.setswitchinterval(interval)
            # The process's CPU less the sampler's own and the benchmark client's (this thread): what the host spent.
            client = time.thread_time() - client_started
            self.cpu_seconds = time.process_time() - started - self._own_cpu - client

    def shares(self) -> dict[str, float]:
        """CPU seconds per owner (the process CPU split by busy samples)."""
        busy = sum(self.samples.values()) or 1
        return {owner: self.cpu_seconds * count / busy for owner, count in self.samples.most_common()}


CLIENT_THREAD = "the benchmark's main thread (its HTTP client, unless that runs in a process of its own)"
# Thread names (prefixes) of the host process and what runs on each.
THREAD_ROLES = (
    ("devhost-sync", "orchestrator episodes (Durable SDK + app orchestrator; sync pool)"),
    ("devhost-", "event loop (HTTP, devhost engine, async activities incl. the model client)"),
    ("session-store", "session store thread (SQLite)"),
    ("scripted-model", "model server (the benchmark's model: not overhead)"),
    ("cpu-sampler", "the sampler itself"),
    ("MainThread", CLIENT_THREAD),
)


def thread_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) of each thread of this process, by native id, with its Python name (Linux /proc;
    exact, unlike samples)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        found[int(tid)] = (names.get(int(tid), "other"), (int(fields[11]) + int(fields[12])) / tick)
    return found


def by_thread_role(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds spent between two `thread_cpu()` readings, by the role of each thread (`THREAD_ROLES`)."""
    spent: Counter[str] = Counter()
    for tid, (name, cpu) in after.items():
        role = next((r for prefix, r in THREAD_ROLES if name.startswith(prefix)), "other threads")
        spent[role] += cpu - before.get(tid, (name, 0.0))[1]
    return dict(spent.most_common())
