"""Retry a model call on transient failures, with exponential backoff that honours the server's `Retry-After`.

The decision is `agent_runtime.models.retry.RetryPolicy`'s (one policy for the middleware and the durable layer):
only a `ModelError` marked retryable (429, 408, 409, 5xx, timeouts, connection) is retried; its `retry_after` is
waited exactly; a `Retry-After` beyond `max_retry_after` is not waited out inside the call - the error propagates and
the caller's (durable) retry, which can wait without holding a worker, takes over.

Each retry re-runs the inner layers too (they see the same context), so put this layer outside the ones whose work
should be repeated and inside the ones that should see the call once (e.g. audit outside retry: one record per call).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from ..models.errors import ModelError
from ..models.retry import FailedAttemptUsage, RetryPolicy, call_with_retry
from .pipeline import CallNext


class RetryMiddleware:
    def __init__(
        self,
        policy: RetryPolicy | None = None,
        *,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.policy = policy or RetryPolicy()
        self._sleep = sleep  # injectable: tests pass a recording fake instead of waiting

    async def process(self, context: Any, call_next: CallNext) -> None:
        failed = FailedAttemptUsage()  # a retried attempt's reported usage was billed: the answer counts it

        def record(attempt: int, error: ModelError, delay: float) -> None:
            failed.count(attempt, error, delay)
            context.metadata.setdefault("retries", []).append(
                {"attempt": attempt, "delay": delay, "status": error.status, "code": error.code}
            )

        try:
            await call_with_retry(call_next, self.policy, sleep=self._sleep, on_retry=record)
        except ModelError as error:
            failed.onto(error)
            raise
        if failed.usage is not None and context.result is not None:
            context.result = context.result.model_copy(update={"usage": failed.usage + context.result.usage})
