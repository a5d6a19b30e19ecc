"""A `ModelClient` that applies our `RetryPolicy` to every non-streaming call.

The durable `call_model` activity uses it so transient model errors (429 with `Retry-After`, 5xx, timeouts) are
retried in-process first; what outlives the policy propagates and the activity's durable retry takes over.
Streaming calls are not retried: updates may already have been handed to a listener.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ..messages import ChatResponse, ChatResponseUpdate
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

    def get_streaming_response(self, request: ChatRequest) -> AsyncIterator[ChatResponseUpdate]:
        return self.inner.get_streaming_response(request)
