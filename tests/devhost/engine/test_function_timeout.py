"""`bounded`: host.json `functionTimeout` around one invocation (what `asyncio.timeout` does, with one loop timer for
all invocations in flight)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from devhost.function_timeout import FunctionTimeoutError, bounded

SHORT = timedelta(seconds=0.05)
LONG = timedelta(seconds=30)


async def test_an_invocation_past_its_limit_fails_with_the_hosts_text() -> None:
    with pytest.raises(FunctionTimeoutError, match=r"^Timeout value of 00:00:00.0500000 was exceeded by function: "
                                                   r"Functions.slow$"):
        await bounded(asyncio.sleep(5), SHORT, "slow")


async def test_within_its_limit_it_returns_what_the_function_returns() -> None:
    async def quick() -> str:
        await asyncio.sleep(0)
        return "done"

    assert await bounded(quick(), SHORT, "quick") == "done"
    assert await bounded(quick(), None, "quick") == "done"


async def test_a_shorter_limit_after_a_longer_one_still_fires_on_time() -> None:
    """One timer watches every deadline: a later, shorter one moves it earlier; the longer one keeps running."""
    long_call = asyncio.ensure_future(bounded(asyncio.sleep(0.3, "long"), LONG, "long"))
    await asyncio.sleep(0)
    started = asyncio.get_running_loop().time()
    with pytest.raises(FunctionTimeoutError):
        await bounded(asyncio.sleep(5), SHORT, "short")
    assert asyncio.get_running_loop().time() - started < 1.0
    assert await long_call == "long"


async def test_deadlines_of_finished_invocations_cancel_nothing() -> None:
    for _ in range(3):
        assert await bounded(asyncio.sleep(0, "fast"), SHORT, "fast") == "fast"
    await asyncio.sleep(0.1)  # past the finished deadlines: the timer fires for nothing
    assert await bounded(asyncio.sleep(0.01, "next"), SHORT, "next") == "next"


async def test_several_invocations_expire_together_and_alone() -> None:
    calls = [asyncio.ensure_future(bounded(asyncio.sleep(5), SHORT, f"f{i}")) for i in range(3)]
    survivor = asyncio.ensure_future(bounded(asyncio.sleep(0.15, "ok"), LONG, "survivor"))
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, FunctionTimeoutError) for r in results)
    assert await survivor == "ok"


async def test_each_deadline_fires_in_turn() -> None:
    """After the earliest deadline fires, the timer is set for the next one."""
    first = asyncio.ensure_future(bounded(asyncio.sleep(5), SHORT, "first"))
    await asyncio.sleep(0.03)
    second = asyncio.ensure_future(bounded(asyncio.sleep(5), SHORT, "second"))
    with pytest.raises(FunctionTimeoutError, match="first"):
        await first
    assert not second.done()
    with pytest.raises(FunctionTimeoutError, match="second"):
        await asyncio.wait_for(second, 1.0)


async def test_a_cancel_from_outside_is_a_cancel_not_a_timeout() -> None:
    call = asyncio.ensure_future(bounded(asyncio.sleep(5), LONG, "f"))
    await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


async def test_a_timeout_error_of_the_function_itself_is_not_the_hosts() -> None:
    async def raises() -> None:
        raise TimeoutError("the function's own")

    with pytest.raises(TimeoutError, match="the function's own"):
        await bounded(raises(), LONG, "f")
