"""Starting real worker processes (Azure's worker library) when some die during their handshake.

`RuntimeWorkerPool` starts a worker again when its process dies during the handshake (up to START_ATTEMPTS starts),
and a process lost before it joined a group gets no replacement on top of that (test_worker_pool_start.py checks
both with stand-in starts). Here the processes are real: worker_death_hook.py, made the workers' `sitecustomize`
through PYTHONPATH (the pool copies the host's environment), makes the first ones exit when the worker library
imports the app in its `WorkerInitRequest`. Python 3.13+ with the library installed (`make test-py313`); skipped
elsewhere, as test_real_worker.py.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_worker_processes import gone, wait_until
from worker_death_hook import EXIT_CODE, HOLD_VARIABLE, STATE_VARIABLE

from devhost.host import DevHost
from devhost.testing import InProcessHost
from devhost.worker.channel import WorkerLostError
from devhost.worker.pool import START_ATTEMPTS, RuntimeWorkerPool, library_version

pytestmark = pytest.mark.skipif(library_version() is None,
                                reason="azure-functions-runtime needs Python 3.13+ (make test-py313)")

APP = Path(__file__).resolve().parents[1] / "apps" / "http_basic"
HOOK = Path(__file__).resolve().parent / "worker_death_hook.py"
WORKERS = 1  # FUNCTIONS_WORKER_PROCESS_COUNT: one worker for HTTP and activities, plus the orchestration worker
PROCESSES = WORKERS + 1


@dataclass
class Deaths:
    """The hook's state: deaths left (`markers/`), and the workers that started, died and held (by pid)."""

    state: Path

    def left(self) -> int:
        return len(os.listdir(self.state / "markers"))

    def started(self) -> set[int]:
        return {int(name) for name in os.listdir(self.state / "started")}

    def died(self) -> set[int]:
        return {int(name) for name in os.listdir(self.state / "died")}

    def held(self) -> set[int]:
        return {int(name) for name in os.listdir(self.state / "held")}

    def env(self, *, hold: bool = False) -> dict[str, str]:
        """What the host's environment needs for its workers to run the hook (as their `sitecustomize`)."""
        path = [str(self.state / "site"), os.environ.get("PYTHONPATH", "")]
        env = {"PYTHONPATH": os.pathsep.join(p for p in path if p), STATE_VARIABLE: str(self.state)}
        return {**env, HOLD_VARIABLE: "1"} if hold else env


def deaths(tmp_path: Path, count: int) -> Deaths:
    for name in ("site", "markers", "started", "died", "held"):
        (tmp_path / name).mkdir()
    shutil.copy(HOOK, tmp_path / "site" / "sitecustomize.py")
    for n in range(count):
        (tmp_path / "markers" / f"death-{n + 1}").touch()
    return Deaths(tmp_path)


def all_gone(pids: set[int]) -> None:
    """Every process in `pids` exits (bounded: a leaked worker would live as long as this test process)."""
    try:
        wait_until(lambda: all(gone(pid) for pid in pids), "the worker processes to exit")
    except TimeoutError:
        pytest.fail(f"worker processes left running: {sorted(pid for pid in pids if not gone(pid))}")


def test_workers_that_die_in_their_handshake_are_started_again_and_not_replaced_on_top(tmp_path: Path) -> None:
    # Two deaths among the two workers started side by side: whichever takes them (one worker twice, or each once),
    # no start dies START_ATTEMPTS times. A fixed 2, not START_ATTEMPTS - 1: with a single attempt this start fails.
    hook = deaths(tmp_path, 2)
    with InProcessHost(APP, worker="runtime", workers=WORKERS, env=hook.env()) as host:
        assert host.client.get("/api/hello", params={"name": "again"}).text == "hello again"
        workers = set(host.host.worker_pids)
        assert hook.left() == 0 and len(hook.died()) == 2  # the deaths happened: no vacuous pass
        assert len(workers) == PROCESSES and not workers & hook.died()
        # Every process started is one of the two that died or a worker of the host: none started as a replacement
        # for a worker lost in its handshake (the start that was handshaking with it tried again itself).
        assert hook.started() == workers | hook.died()
        assert {pid for pid in hook.started() if not gone(pid)} == workers
        assert host.client.get("/api/hello", params={"name": "still"}).text == "hello still"
        assert set(host.host.worker_pids) == workers
    all_gone(hook.started())


@contextmanager
def environment(overrides: dict[str, str]) -> Iterator[None]:
    """`overrides` for the host's lifetime; the whole environment (local.settings.json's values too) restored after."""
    saved = dict(os.environ)
    os.environ.update(overrides)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_when_every_start_of_a_worker_dies_the_host_does_not_start_and_leaves_no_process(tmp_path: Path) -> None:
    # One death more than the two starts side by side can take and both succeed: one of them dies START_ATTEMPTS
    # times (whichever). The other may still be handshaking when the pool closes, and complete: it must not stay.
    hook = deaths(tmp_path, PROCESSES * (START_ATTEMPTS - 1) + 1)
    with environment(hook.env()), pytest.raises(WorkerLostError) as caught:
        # asyncio.run returns once the loop's executor threads are done: no start of the pool runs on after it.
        asyncio.run(DevHost.start(APP, worker="runtime", workers=WORKERS))
    died = re.fullmatch(
        rf"the worker process (\d+) exited with code {EXIT_CODE}; each of its {START_ATTEMPTS} starts exited during its"
        " handshake",
        str(caught.value),
    )
    assert died is not None and int(died[1]) in hook.died(), caught.value  # the last death of the failed start
    assert len(hook.died()) >= START_ATTEMPTS
    # The other start may have stopped early (the pool closed): a process of it may have exited without a death.
    assert hook.died() <= hook.started() and len(hook.started()) <= PROCESSES * START_ATTEMPTS
    all_gone(hook.started())


def test_a_worker_whose_start_completes_after_the_pool_closed_is_stopped(tmp_path: Path) -> None:
    """A start that was handshaking when its pool closed (another worker's start failed, or the host was stopped
    during its start) still completes; its worker must be stopped, not added to the closed pool's group and left
    running. Here the start is cancelled while both workers hold in their `WorkerInitRequest`; they go on once the
    pool has closed."""
    hook = deaths(tmp_path, 0)

    async def cancelled_start() -> None:
        start = asyncio.ensure_future(RuntimeWorkerPool.start(APP, WORKERS))
        deadline = asyncio.get_running_loop().time() + 120
        while len(hook.held()) < PROCESSES:  # both workers connected and handshaking
            assert not start.done(), start
            assert asyncio.get_running_loop().time() < deadline, "the workers did not reach their handshake"
            await asyncio.sleep(0.02)
        start.cancel()
        with pytest.raises(asyncio.CancelledError):
            await start

    with environment(hook.env(hold=True)):
        asyncio.run(cancelled_start())  # returns once the starts (on the loop's executor threads) are done
    assert hook.held() == hook.started() and len(hook.started()) == PROCESSES and not hook.died()
    all_gone(hook.started())
