"""A `ModelClient` that applies our `RetryPolicy` to every call.

The durable `call_model` activity uses it so transient model errors (429 with `Retry-After`, 5xx, timeouts) are
retried in-process first; what outlives the policy propagates and the activity's durable retry takes over.
A streaming call is retried only until its first update: after that, updates have been handed to a listener and a
new attempt would repeat them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ..messages import ChatResponse, ChatResponseUpdate
from .errors import ModelError
from .retry import RetryPolicy, call_with_retry
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
        return await call_with_retry(lambda: self.inner.get_response(request), self.policy, sleep=self._sleep)

    async def get_streaming_response(self, request: ChatRequest) -> AsyncIterator[ChatResponseUpdate]:
        attempt = 1
        while True:
            stream = self.inner.get_streaming_response(request)
            try:
                first = await anext(stream)
            except StopAsyncIteration:
                return
            except ModelError as error:
                delay = self.policy.delay_for(attempt, error)
                if delay is None:
                    raise
                await self._sleep(delay)
                attempt += 1
                continue
            yield first
            async for update in stream:
                yield update
            return
