"""Checks of outside input (a client's schema, an MCP server's schemas, arguments against them) run on a small pool
of their own (`agent_runtime.check_threads`): a burst of costly ones queues there and leaves asyncio's default
executor, which the process's own work needs (DNS for a new model connection, a Python tool, a token), free."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from agent_runtime.check_threads import CHECK_THREAD_PREFIX, CHECK_THREADS, check_off_loop

CALLER = contextvars.ContextVar("caller", default="nobody")


async def test_a_burst_of_costly_checks_queues_on_its_own_threads_and_leaves_the_default_executor_free() -> None:
    release = threading.Event()
    lock = threading.Lock()
    running, most, threads = 0, 0, set()

    def costly_check(index: int) -> tuple[int, str]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            threads.add(threading.current_thread().name)
        release.wait(30)  # a check at its deadline: seconds of work
        with lock:
            running -= 1
        return index, CALLER.get()

    CALLER.set("client-7")
    burst = [asyncio.create_task(check_off_loop(costly_check, i)) for i in range(CHECK_THREADS * 3)]
    try:
        while most < CHECK_THREADS:
            await asyncio.sleep(0.01)
        # Every check thread is busy and more checks wait: the process's own work still gets threads at once.
        resolved = await asyncio.wait_for(asyncio.get_running_loop().getaddrinfo("localhost", 80), 10)
        assert resolved
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "a Python tool ran"), 10) == "a Python tool ran"
        assert running == CHECK_THREADS and not any(task.done() for task in burst)
    finally:
        release.set()
    results = await asyncio.gather(*burst)
    # Each check ran with its caller's context (its span, its settings) and answered its own caller.
    assert results == [(i, "client-7") for i in range(CHECK_THREADS * 3)]
    assert most == CHECK_THREADS and all(name.startswith(CHECK_THREAD_PREFIX) for name in threads), threads


async def test_a_check_that_raises_reaches_its_caller() -> None:
    def refuse() -> None:
        raise ValueError("the schema refers to https://example.invalid")

    with pytest.raises(ValueError, match=r"example\.invalid"):
        await check_off_loop(refuse)
