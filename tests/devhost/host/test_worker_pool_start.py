"""Starting Azure's worker processes: a worker that dies during its handshake is started again, a few times.

Workers started side by side can lose a race for a free port (the worker library's HTTP-streaming server picks one,
then binds it) and exit; the start tries again. The processes are stood in for here (`_start_one`); starting real
ones is `test_real_worker.py`'s (Python 3.13+)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from devhost.worker import pool as pool_module
from devhost.worker import rpc
from devhost.worker.channel import WorkerLostError
from devhost.worker.pool import START_ATTEMPTS, RuntimeWorkerPool
from devhost.worker.wire import encode


@pytest.fixture
def pool(tmp_path: Any) -> Iterator[RuntimeWorkerPool]:
    made = RuntimeWorkerPool(str(tmp_path), 1, startup_timeout=5, episode_timeout=5, log_level="WARNING")
    yield made
    made._listener.close()


class _Channel:
    pid = 7


CHANNEL = _Channel()


def dying_starts(pool: RuntimeWorkerPool, deaths: int, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []

    def start_one() -> Any:
        calls.append(len(calls) + 1)
        if len(calls) <= deaths:
            raise WorkerLostError(f"the worker process {len(calls)} exited with code 3")
        return CHANNEL

    monkeypatch.setattr(pool, "_start_one", start_one)
    return calls


def test_a_worker_that_dies_in_its_handshake_is_started_again(
    pool: RuntimeWorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = dying_starts(pool, START_ATTEMPTS - 1, monkeypatch)
    group: list[Any] = []
    assert pool._spawn(group) is CHANNEL
    assert group == [CHANNEL] and len(calls) == START_ATTEMPTS


def test_after_its_last_attempt_the_start_fails_with_the_workers_error(
    pool: RuntimeWorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = dying_starts(pool, START_ATTEMPTS, monkeypatch)
    with pytest.raises(WorkerLostError, match=f"process {START_ATTEMPTS} exited.*each of its {START_ATTEMPTS} starts"):
        pool._spawn([])
    assert len(calls) == START_ATTEMPTS


def test_a_refused_app_is_not_started_again(pool: RuntimeWorkerPool, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def refused() -> Any:
        calls.append(1)
        raise pool_module.WorkerStartError("the worker refused the app")

    monkeypatch.setattr(pool, "_start_one", refused)
    with pytest.raises(pool_module.WorkerStartError):
        pool._spawn([])
    assert calls == [1]


def test_a_worker_lost_before_joining_a_group_is_not_replaced_on_top(
    pool: RuntimeWorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The start that was handshaking with it tries again itself: a replacement too would make one worker too many.
    replaced: list[Any] = []
    monkeypatch.setattr(pool, "_replace", replaced.append)
    monkeypatch.setattr(pool_module.threading, "Thread", lambda target, args, daemon: _Now(target, args))

    class Stranger:
        pid = 42

    pool._lost(Stranger())  # type: ignore[arg-type]
    assert replaced == []
    pool._functions.append(member := Stranger())  # type: ignore[arg-type]
    pool._lost(member)  # type: ignore[arg-type]
    assert replaced == [pool._functions]


class _Now:
    def __init__(self, target: Any, args: tuple[Any, ...]) -> None:
        self.target, self.args = target, args

    def start(self) -> None:
        self.target(*self.args)


def test_a_worker_that_connects_before_its_start_goes_on_is_taken(
    pool: RuntimeWorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a loaded machine a worker can connect and say its token before the thread that started it runs again: the
    pool closed such a connection (nobody waited for that token yet), the worker exited with code 0 "before
    connecting", and the host did not start (seen through Azure's worker under load). Here the stand-in process
    connects and says its token before `Popen` even returns."""
    pool._acceptor.start()

    class Connected:
        """A started worker process that is already connected and running."""

        returncode = None

        def __init__(self, token: str) -> None:
            host, _, port = pool._address.rpartition(":")
            self.sock = socket.create_connection((host, int(port)))
            self.sock.sendall(encode(rpc.StreamingMessage(start_stream=rpc.StartStream(worker_id=token))))
            time.sleep(0.2)  # the acceptor reads the token meanwhile

        def poll(self) -> int | None:
            return None

        def kill(self) -> None:  # (a start that failed stops its process)
            self.sock.close()

        def wait(self) -> int:
            return 0

    started: list[Connected] = []

    def popen(token: str) -> Any:
        started.append(Connected(token))
        return started[-1]

    monkeypatch.setattr(pool, "_popen", popen)
    try:
        process, sock = pool._launch("the-token")
        with sock:
            assert process is started[0]
            sock.sendall(b"hello")
            assert started[0].sock.recv(5) == b"hello"  # the connection the worker made, not a closed one
    finally:
        pool._closing = True
        started[0].sock.close()
        pool._listener.shutdown(socket.SHUT_RDWR)  # wakes the acceptor blocked in accept(), as `close()` does
        pool._acceptor.join(5)
