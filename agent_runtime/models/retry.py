"""Our retry policy for model calls (the openai SDK's own retries are switched off: `max_retries=0`).

Why ours: the SDK's retry loop sleeps inside the call, invisible to middleware, to usage accounting and to the durable
layer. Here a retry is a decision made from a classified `ModelError`:
- not retryable (400/401/403/404...) -> fail at once;
- the server sent `Retry-After` -> wait exactly that long (no jitter: the server said when), unless it exceeds
  `max_retry_after`, in which case we give up here and let the caller (e.g. the durable layer, with a durable
  timer) decide - a worker must not sleep for minutes;
- otherwise exponential backoff with jitter, capped by `max_delay`; at most `max_attempts` attempts in total.

`RetryPolicy.delay_for` is the pure computation (the chat retry middleware and the durable layer call it);
`call_with_retry` is the small in-process loop around one awaitable call.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ..messages import Usage
from .errors import ModelError

log = logging.getLogger(__name__)

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]
OnRetry = Callable[[int, ModelError, float], None]


class RetryPolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_attempts: int = Field(default=4, ge=1)
    """Attempts in total, the first one included (1 = never retry)."""
    initial_delay: float = Field(default=0.5, ge=0)
    multiplier: float = Field(default=2.0, ge=1)
    max_delay: float = Field(default=20.0, ge=0)
    jitter: float = Field(default=0.2, ge=0, le=1)
    """Backoff delays vary by up to this fraction either way, so clients that failed together do not retry together."""
    max_retry_after: float = Field(default=60.0, ge=0)
    """Longest server-requested wait honoured in-process; longer -> give up and surface the error."""

    def backoff(self, attempt: int, *, random_value: float | None = None) -> float:
        """The backoff delay after failed attempt number `attempt` (1-based); `random_value` in [0, 1) pins jitter."""
        base = min(self.max_delay, self.initial_delay * self.multiplier ** max(0, attempt - 1))
        r = random.random() if random_value is None else random_value
        return max(0.0, min(self.max_delay, base * (1 + self.jitter * (2 * r - 1))))

    def delay_for(self, attempt: int, error: ModelError, *, random_value: float | None = None) -> float | None:
        """Seconds to wait before the next attempt after attempt `attempt` failed with `error`, or None to give up."""
        if not error.retryable or attempt >= self.max_attempts:
            return None
        if error.retry_after is not None:
            return error.retry_after if error.retry_after <= self.max_retry_after else None
        return self.backoff(attempt, random_value=random_value)


NO_RETRY = RetryPolicy(max_attempts=1)


class FailedAttemptUsage:
    """The usage the provider reported for attempts a retry replaced (`ModelError.usage`: billed, though the call
    failed), so the answer (or the error the retries end with) accounts for them. `count` is an `OnRetry`."""

    def __init__(self) -> None:
        self.usage: Usage | None = None

    def count(self, attempt: int, error: ModelError, delay: float) -> None:
        if error.usage is not None:
            self.usage = error.usage + self.usage

    def onto(self, error: ModelError) -> None:
        """The error the retries end with reports every failed attempt's usage."""
        if self.usage is not None:
            error.usage = self.usage + error.usage


async def call_with_retry(
    operation: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    sleep: Sleep = asyncio.sleep,
    on_retry: OnRetry | None = None,
) -> T:
    """Run `operation` until it succeeds or `policy` gives up (then its last `ModelError` is raised).

    Only `ModelError` is retried; anything else is a bug or a cancellation and propagates at once.
    """
    attempt = 1
    while True:
        try:
            return await operation()
        except ModelError as error:
            delay = policy.delay_for(attempt, error)
            if delay is None:
                raise
            log.warning("model call failed (attempt %d, %s); retrying in %.2fs", attempt, error.code, delay)
            if on_retry is not None:
                on_retry(attempt, error, delay)
            await sleep(delay)
            attempt += 1
