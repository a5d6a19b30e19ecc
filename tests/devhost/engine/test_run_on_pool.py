"""`run_on_pool`: a sync call on the worker's thread pool, awaited on the loop (what `run_in_executor` gives), on
devhost's own sync pool and on any executor; and that pool as an Executor."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import CancelledError, Executor, ThreadPoolExecutor

import pytest

from devhost.execution import run_on_pool
from devhost.sync_pool import SyncThreadPool


@pytest.fixture(params=["sync pool", "ThreadPoolExecutor"])
def pool(request: pytest.FixtureRequest) -> Iterator[Executor]:
    """One thread, named test-pool_0."""
    executor: Executor = (SyncThreadPool(1, thread_name_prefix="test-pool") if request.param == "sync pool"
                          else ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-pool"))
    yield executor
    executor.shutdown(wait=True)


async def test_the_call_runs_on_the_pool_and_its_result_comes_back(pool: Executor) -> None:
    assert await run_on_pool(pool, lambda a, b: (a + b, threading.current_thread().name), 2, 3) == (5, "test-pool_0")


async def test_its_exception_comes_back(pool: Executor) -> None:
    def fails() -> None:
        raise KeyError("nope")

    with pytest.raises(KeyError, match="nope"):
        await run_on_pool(pool, fails)


async def test_a_stop_iteration_comes_back_as_an_error_not_a_hang(pool: Executor) -> None:
    with pytest.raises(RuntimeError, match="StopIteration"):
        await asyncio.wait_for(run_on_pool(pool, next, iter(())), 5)


async def test_a_call_cancelled_before_a_thread_took_it_never_runs(pool: Executor) -> None:
    release = threading.Event()
    ran: list[str] = []
    busy = run_on_pool(pool, release.wait)  # the only thread is busy
    queued = run_on_pool(pool, ran.append, "queued")
    queued.cancel()
    release.set()
    await busy
    await run_on_pool(pool, ran.append, "after")
    assert ran == ["after"]


async def test_a_call_cancelled_while_it_runs_finishes_and_its_result_is_dropped(pool: Executor) -> None:
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait()
        return "late"

    call = run_on_pool(pool, slow)
    await asyncio.get_running_loop().run_in_executor(None, started.wait)
    call.cancel()
    release.set()
    assert await run_on_pool(pool, lambda: "next") == "next"  # the late result was dropped without an error
    assert call.cancelled()


def test_the_sync_pool_starts_threads_as_calls_need_them_up_to_its_size() -> None:
    pool = SyncThreadPool(3, thread_name_prefix="sized")
    try:
        assert [pool.submit(lambda: threading.current_thread().name).result() for _ in range(5)] == ["sized_0"] * 5
        release, three_running = threading.Event(), threading.Barrier(4)

        def held() -> str:
            if not release.is_set():
                three_running.wait(5)  # the first three run at once, on three threads
            release.wait(5)
            return threading.current_thread().name

        running = [pool.submit(held) for _ in range(5)]
        three_running.wait(5)
        release.set()
        assert {f.result() for f in running[:3]} == {"sized_0", "sized_1", "sized_2"}
        assert {f.result() for f in running} == {"sized_0", "sized_1", "sized_2"}
        assert len([t for t in threading.enumerate() if t.name.startswith("sized_")]) == 3
        assert list(pool.map(lambda x: x * 2, range(4))) == [0, 2, 4, 6]
    finally:
        pool.shutdown(wait=True)
    assert not [t for t in threading.enumerate() if t.name.startswith("sized_")]


async def test_the_sync_pool_shuts_down_cancelling_what_waits() -> None:
    pool = SyncThreadPool(1, thread_name_prefix="closing")
    started, release = threading.Event(), threading.Event()
    busy = pool.submit(lambda: (started.set(), release.wait())[1])
    assert started.wait(5)
    queued = pool.submit(lambda: "never")
    queued_on_loop = pool.run_soon(asyncio.get_running_loop(), lambda: "never")
    pool.shutdown(wait=False, cancel_futures=True)
    release.set()
    assert busy.result(5) is True
    assert queued.cancelled()
    with pytest.raises(asyncio.CancelledError):
        await queued_on_loop
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(lambda: None)
    with pytest.raises(CancelledError):
        queued.result()
