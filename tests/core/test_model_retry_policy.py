"""`RetryPolicy`: the pure retry decision shared by the retry middleware and the durable layer."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_runtime.models import NO_RETRY, ModelError, RetryPolicy, call_with_retry

TRANSIENT = ModelError("503", status=503, retryable=True)
FATAL = ModelError("400", status=400, retryable=False)


def test_backoff_grows_exponentially_and_is_capped():
    policy = RetryPolicy(initial_delay=0.5, multiplier=2, max_delay=3, jitter=0, max_attempts=10)
    assert [policy.delay_for(n, TRANSIENT) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_gives_up_after_max_attempts_and_on_non_retryable_errors():
    policy = RetryPolicy(max_attempts=3)
    assert policy.delay_for(2, TRANSIENT) is not None
    assert policy.delay_for(3, TRANSIENT) is None
    assert policy.delay_for(1, FATAL) is None
    assert NO_RETRY.delay_for(1, TRANSIENT) is None


def test_retry_after_is_honoured_exactly_up_to_the_limit():
    policy = RetryPolicy(max_retry_after=30, jitter=0.5)
    assert policy.delay_for(1, ModelError("429", status=429, retryable=True, retry_after=7.5)) == 7.5
    assert policy.delay_for(1, ModelError("429", status=429, retryable=True, retry_after=31)) is None


@given(attempt=st.integers(1, 30), r=st.floats(0, 1, exclude_max=True), jitter=st.floats(0, 1))
def test_jittered_backoff_stays_within_bounds(attempt, r, jitter):
    policy = RetryPolicy(initial_delay=0.2, multiplier=3, max_delay=10, jitter=jitter, max_attempts=50)
    base = min(10, 0.2 * 3 ** (attempt - 1))
    delay = policy.backoff(attempt, random_value=r)
    assert base * (1 - jitter) - 1e-9 <= delay <= min(10, base * (1 + jitter)) + 1e-9


async def test_call_with_retry_reports_each_retry_and_does_not_retry_other_exceptions():
    outcomes = [TRANSIENT, TRANSIENT, "done"]
    seen: list[tuple[int, float]] = []
    waits: list[float] = []

    async def operation():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def sleep(delay: float) -> None:
        waits.append(delay)

    policy = RetryPolicy(initial_delay=1, jitter=0)
    result = await call_with_retry(operation, policy, sleep=sleep, on_retry=lambda n, e, d: seen.append((n, d)))
    assert result == "done" and seen == [(1, 1.0), (2, 2.0)] and waits == [1.0, 2.0]

    async def bug():
        raise KeyError("not a model error")

    with pytest.raises(KeyError):
        await call_with_retry(bug, policy, sleep=sleep)
    assert waits == [1.0, 2.0]
