"""A `ModelClient` that applies our `RetryPolicy` to every call.

The durable `call_model` activity uses it so transient model errors (429 with `Retry-After`, 5xx, timeouts) are
retried in-process first; what outlives the policy propagates and the activity's durable retry takes over.
A streaming call is retried only until its first update: after that, updates have been handed to a listener and a
new attempt would repeat them.

What the provider reported for a failed attempt (`ModelError.usage`: billed though unusable) is not dropped by a
retry: it is added to the answer's usage, or to the error's when the policy gives up.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ..messages import ChatResponse, ChatResponseUpdate
from .errors import ModelError
from .retry import FailedAttemptUsage, RetryPolicy, call_with_retry
from .types import ChatRequest, ModelClient


class RetryingModelClient:
    def __init__(
        self,
        inner: ModelClient,
        policy: RetryPolicy,
        *,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.inner = inner
        self.policy = policy
        self._sleep = sleep

    async def get_response(self, request: ChatRequest) -> ChatResponse:
        failed = FailedAttemptUsage()
        try:
            response = await call_with_retry(
                lambda: self.inner.get_response(request), self.policy, sleep=self._sleep, on_retry=failed.count
            )
        except ModelError as error:
            failed.onto(error)
            raise
        if failed.usage is not None:
            response = response.model_copy(update={"usage": failed.usage + response.usage})
        return response

    async def get_streaming_response(self, request: ChatRequest) -> AsyncIterator[ChatResponseUpdate]:
        attempt = 1
        failed = FailedAttemptUsage()
        while True:
            stream = self.inner.get_streaming_response(request)
            try:
                first = await anext(stream)
            except StopAsyncIteration:
                break
            except ModelError as error:
                delay = self.policy.delay_for(attempt, error)
                if delay is None:
                    failed.onto(error)
                    raise
                failed.count(attempt, error, delay)
                await self._sleep(delay)
                attempt += 1
                continue
            yield first
            try:
                async for update in stream:
                    yield update
            except ModelError as error:
                failed.onto(error)
                raise
            break
        if failed.usage is not None:
            yield ChatResponseUpdate(usage=failed.usage)  # an answer's usage is the sum of its updates'

