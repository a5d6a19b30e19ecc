"""`run_on_pool`: a sync call on the worker's thread pool, awaited on the loop (what `run_in_executor` gives)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from devhost.execution import run_on_pool


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-pool")
    yield executor
    executor.shutdown(wait=True)


async def test_the_call_runs_on_the_pool_and_its_result_comes_back(pool: ThreadPoolExecutor) -> None:
    assert await run_on_pool(pool, lambda a, b: (a + b, threading.current_thread().name), 2, 3) == (5, "test-pool_0")


async def test_its_exception_comes_back(pool: ThreadPoolExecutor) -> None:
    def fails() -> None:
        raise KeyError("nope")

    with pytest.raises(KeyError, match="nope"):
        await run_on_pool(pool, fails)


async def test_a_stop_iteration_comes_back_as_an_error_not_a_hang(pool: ThreadPoolExecutor) -> None:
    with pytest.raises(RuntimeError, match="StopIteration"):
        await asyncio.wait_for(run_on_pool(pool, next, iter(())), 5)


async def test_a_call_cancelled_before_a_thread_took_it_never_runs(pool: ThreadPoolExecutor) -> None:
    release = threading.Event()
    ran: list[str] = []
    busy = run_on_pool(pool, release.wait)  # the only thread is busy
    queued = run_on_pool(pool, ran.append, "queued")
    queued.cancel()
    release.set()
    await busy
    await run_on_pool(pool, ran.append, "after")
    assert ran == ["after"]


async def test_a_call_cancelled_while_it_runs_finishes_and_its_result_is_dropped(pool: ThreadPoolExecutor) -> None:
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
