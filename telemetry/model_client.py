"""`TracedModelClient`: a `ModelClient` wrapper that makes each call a `chat {model}` span and records its metrics.

Wrap the client the step uses (outside the retrying client: one span per model call, retries inside it).
Message contents go on the span only when `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`
(`gen_ai.input.messages`, `gen_ai.output.messages`, JSON as the GenAI conventions describe them).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import nullcontext
from functools import cached_property
from typing import Any
from urllib.parse import SplitResult, urlsplit

from opentelemetry.trace import INVALID_SPAN, Span, SpanKind

from agent_runtime.messages import (
    ChatResponse,
    ChatResponseUpdate,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    TextContent,
    Usage,
    UsageContent,
)
from agent_runtime.models.types import ChatRequest, ModelClient
from agent_runtime.steps import default_model
from telemetry import metrics
from telemetry.settings import TelemetrySettings
from telemetry.spans import mark_error, tracer, tracing

# gen_ai.provider.name well-known values; every client here speaks the OpenAI API.
_PROVIDERS = {"azure_openai": "azure.ai.openai"}


class TracedModelClient:
    def __init__(self, inner: ModelClient, *, agent: str | None = None, capture_content: bool | None = None) -> None:
        """`capture_content`: put message contents on the span (None: as `TelemetrySettings` says now; a caller that
        makes many clients passes the value it read once - reading the settings costs about half a millisecond)."""
        self.inner = inner
        self.agent = agent
        self.capture_content = (
            TelemetrySettings().capture_message_content if capture_content is None else capture_content
        )
        self.default_model = default_model(inner)

    @cached_property
    def _base(self) -> Any:
        """The client at the bottom of the wrappers (it knows the provider and the server)."""
        base = self.inner
        while getattr(base, "inner", None) is not None and getattr(base, "provider", None) is None:
            base = base.inner
        return base

    @cached_property
    def provider(self) -> str:
        return _PROVIDERS.get(str(getattr(self._base, "provider", "openai")), "openai")

    @cached_property
    def _server(self) -> SplitResult | None:
        base_url = getattr(getattr(self._base, "client", None), "base_url", None)
        return urlsplit(str(base_url)) if base_url is not None else None

    async def get_response(self, request: ChatRequest) -> ChatResponse:
        if not (tracing() or metrics.metering()):
            return await self.inner.get_response(request)
        call = _ChatCall(self, request)
        with call.span() as span:
            response = await self.inner.get_response(request)
            call.finish(span, response.model_id, response.usage, response.finish_reason, response.messages)
            return response

    def get_streaming_response(self, request: ChatRequest) -> AsyncIterator[ChatResponseUpdate]:
        if not (tracing() or metrics.metering()):  # nothing records the call: the inner stream, as it is
            return self.inner.get_streaming_response(request)
        return self._traced_stream(request)

    async def _traced_stream(self, request: ChatRequest) -> AsyncIterator[ChatResponseUpdate]:
        call = _ChatCall(self, request)
        with call.span() as span:
            model_id, finish_reason, usage = None, None, None
            texts: list[str] = []
            calls: list[Any] = []
            async for update in self.inner.get_streaming_response(request):
                model_id = update.model_id or model_id
                finish_reason = update.finish_reason or finish_reason
                usage = update.usage or usage
                for content in update.contents:
                    if isinstance(content, UsageContent):
                        usage = content.usage
                    elif isinstance(content, TextContent):
                        texts.append(content.text)
                    elif isinstance(content, FunctionCallContent):
                        calls.append(content)
                yield update
            output = [Message(role="assistant", contents=["".join(texts), *calls])] if texts or calls else []
            call.finish(span, model_id, usage, finish_reason, output)

    async def aclose(self) -> None:
        aclose = getattr(self.inner, "aclose", None)
        if aclose is not None:
            await aclose()


class _ChatCall:
    def __init__(self, client: TracedModelClient, request: ChatRequest) -> None:
        self.client, self.request = client, request
        self.model = request.options.model or default_model(client.inner)
        self.started = time.perf_counter()

    def span(self) -> _Recording:
        if not tracing():  # the call's metrics only
            return _Recording(nullcontext(INVALID_SPAN), self)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.client.provider,
        }
        if self.model:
            attributes["gen_ai.request.model"] = self.model
        if self.client.agent:
            attributes["gen_ai.agent.name"] = self.client.agent
        options = self.request.options
        for name, value in (
            ("gen_ai.request.temperature", options.temperature),
            ("gen_ai.request.max_tokens", options.max_tokens),
            ("gen_ai.request.top_p", options.top_p),
        ):
            if value is not None:
                attributes[name] = value
        server = self.client._server
        if server is not None and server.hostname:
            attributes["server.address"] = server.hostname
            if server.port:
                attributes["server.port"] = server.port
        if self.client.capture_content:
            attributes["gen_ai.input.messages"] = json.dumps(_messages(self.request.messages), ensure_ascii=False)
        return _Recording(
            tracer().start_as_current_span(
                f"chat {self.model}" if self.model else "chat", kind=SpanKind.CLIENT, attributes=attributes
            ),
            self,
        )

    def finish(
        self,
        span: Span,
        model_id: str | None,
        usage: Usage | None,
        finish_reason: str | None,
        output: Sequence[Message],
    ) -> None:
        self.response_model, self.usage = model_id, usage
        if not span.is_recording():
            return
        if model_id:
            span.set_attribute("gen_ai.response.model", model_id)
        if usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        if finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])
        if self.client.capture_content:
            out = _messages(output, finish_reason)
            span.set_attribute("gen_ai.output.messages", json.dumps(out, ensure_ascii=False))

    def record(self, error_type: str | None) -> None:
        metrics.record_model_call(
            agent=self.client.agent,
            provider=self.client.provider,
            request_model=self.model,
            response_model=getattr(self, "response_model", None),
            usage=getattr(self, "usage", None),
            seconds=time.perf_counter() - self.started,
            error_type=error_type,
        )


class _Recording:
    """The span's context manager, plus the call's metrics and `error.type` when the call fails."""

    def __init__(self, manager: Any, call: _ChatCall) -> None:
        self.manager, self.call = manager, call

    def __enter__(self) -> Span:
        self.span = self.manager.__enter__()
        return self.span

    def __exit__(self, kind: Any, error: Any, tb: Any) -> Any:
        error_type = None
        if error is not None:
            error_type = getattr(error, "code", None) or type(error).__name__
            mark_error(self.span, str(error_type), str(error)[:256])
        self.call.record(error_type)
        return self.manager.__exit__(kind, error, tb)


def _messages(messages: Sequence[Message], finish_reason: str | None = None) -> list[dict[str, Any]]:
    """Messages as the GenAI conventions' `gen_ai.*.messages` JSON (role + parts)."""
    result = []
    for message in messages:
        parts: list[dict[str, Any]] = []
        for content in message.contents:
            if isinstance(content, TextContent):
                if content.text:
                    parts.append({"type": "text", "content": content.text})
            elif isinstance(content, FunctionCallContent):
                parts.append(
                    {"type": "tool_call", "id": content.call_id, "name": content.name, "arguments": content.arguments}
                )
            elif isinstance(content, FunctionResultContent):
                response = content.error if content.is_error else content.result
                parts.append({"type": "tool_call_response", "id": content.call_id, "response": response})
        entry: dict[str, Any] = {"role": message.role, "parts": parts}
        if finish_reason is not None:
            entry["finish_reason"] = finish_reason
        result.append(entry)
    return result
