"""Run in a fresh process by test_no_op_telemetry.py (OpenTelemetry takes one global provider per process): a model
call, a tool span and a run step with the API's default providers, then the same after providers are installed.
Prints what each recorded, as JSON."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_runtime.messages import ChatResponse, ChatResponseUpdate, Message, Usage
from agent_runtime.models.types import ChatRequest
from telemetry.metrics import metering
from telemetry.model_client import TracedModelClient
from telemetry.spans import run_step, tool_span, tracing
from telemetry.trace_context import RunTrace

REQUEST = ChatRequest(messages=[Message.user("hi")])


class Answer:
    model = "m"

    async def get_response(self, request: ChatRequest) -> ChatResponse:
        return ChatResponse(message=Message.assistant("ok"), usage=Usage(input_tokens=1, output_tokens=1))

    async def get_streaming_response(self, request: ChatRequest) -> AsyncIterator[ChatResponseUpdate]:
        yield ChatResponseUpdate(role="assistant", contents=["ok"], usage=Usage(input_tokens=1, output_tokens=1))


async def steps(client: TracedModelClient, inner: Answer) -> dict:
    with run_step(RunTrace.start(), "run-1"):
        parent = trace.get_current_span().get_span_context().is_valid
        stream = client.get_streaming_response(REQUEST)
        passed_through = stream.__qualname__ == "Answer.get_streaming_response"  # type: ignore[attr-defined]
        _ = [update async for update in stream]
        await client.get_response(REQUEST)
        with tool_span("a", "t", "c1") as span:
            tool_recording = span.is_recording()
    return {"tracing": tracing(), "metering": metering(), "run_parent": parent, "passed_through": passed_through,
            "tool_recording": tool_recording}


async def main() -> None:
    inner = Answer()
    client = TracedModelClient(inner, agent="a", capture_content=False)
    before = await steps(client, inner)
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    after = await steps(client, inner)
    data = reader.get_metrics_data()
    names = sorted({m.name for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics} if data else [])
    after["spans"] = sorted(span.name for span in exporter.get_finished_spans())
    after["metrics"] = names
    print(json.dumps({"before": before, "after": after}))


if __name__ == "__main__":
    asyncio.run(main())
