"""Metrics of agent runs (OpenTelemetry metrics API; a no-op until a meter provider is configured).

- `gen_ai.client.token.usage` (histogram, `{token}`): per model call, by `gen_ai.agent.name`,
  `gen_ai.request.model`, `gen_ai.response.model`, `gen_ai.provider.name` and `gen_ai.token.type` (input/output);
- `gen_ai.client.operation.duration` (histogram, `s`): per model call, the same attributes (+ `error.type`);
- `agent_run.cost` (counter, `{currency}`): priced model calls (`MODEL_PRICES`), by agent and request model;
- `agent_run.step.duration` (histogram, `s`): by agent, `agent_run.step` (`chat`, `execute_tool`) and tool;
- `agent_run.approval.latency` (histogram, `s`): request to decision, by agent, tool, `agent_run.approval.decision`;
- `agent_run.duration` (histogram, `s`): start to end of a run, by agent and `agent_run.status`;
- `agent_run.runs` (counter, `{run}`): finished runs by agent, `agent_run.status`, `agent_run.finish_reason`.

Recorded by activities only (a replayed orchestrator records nothing).
"""

from __future__ import annotations

from opentelemetry import metrics

from agent_runtime.messages import Usage
from agent_runtime.redaction import redact_attributes

_meter = metrics.get_meter("durable_agents")


def metering() -> bool:
    """Whether metrics go anywhere: a meter provider is installed. The API's own providers (its proxy, until one is
    installed, and its no-op) record nothing, so the attributes of a measurement are not even built for them. Asked
    on each use: a provider may be installed later (the proxy's instruments then record into it)."""
    return not type(metrics.get_meter_provider()).__module__.startswith("opentelemetry.metrics")
token_usage = _meter.create_histogram(
    "gen_ai.client.token.usage", unit="{token}", description="tokens used per model call"
)
operation_duration = _meter.create_histogram(
    "gen_ai.client.operation.duration", unit="s", description="duration of a model call"
)
cost = _meter.create_counter("agent_run.cost", unit="{currency}", description="cost of model calls at MODEL_PRICES")
step_duration = _meter.create_histogram("agent_run.step.duration", unit="s", description="duration of a run's step")
approval_latency = _meter.create_histogram(
    "agent_run.approval.latency", unit="s", description="from an approval request to its decision"
)
run_duration = _meter.create_histogram("agent_run.duration", unit="s", description="from a run's start to its end")
runs = _meter.create_counter("agent_run.runs", unit="{run}", description="finished runs by final status")


def record_model_call(
    *,
    agent: str | None,
    provider: str,
    request_model: str | None,
    response_model: str | None,
    usage: Usage | None,
    seconds: float,
    error_type: str | None = None,
) -> None:
    if not metering():
        return
    attributes: dict[str, str] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider}
    if agent:
        attributes["gen_ai.agent.name"] = agent
    if request_model:
        attributes["gen_ai.request.model"] = request_model
    if response_model:
        attributes["gen_ai.response.model"] = response_model
    attributes = redact_attributes(attributes)  # the response model and the error type come from the endpoint
    duration_attributes = redact_attributes({**attributes, **({"error.type": error_type} if error_type else {})})
    operation_duration.record(seconds, duration_attributes)
    step_duration.record(seconds, {"agent_run.step": "chat", **({"gen_ai.agent.name": agent} if agent else {})})
    if usage is None:
        return
    token_usage.record(usage.input_tokens, {**attributes, "gen_ai.token.type": "input"})
    token_usage.record(usage.output_tokens, {**attributes, "gen_ai.token.type": "output"})


def record_cost(*, agent: str, request_model: str | None, usage: Usage | None) -> None:
    """A priced model call's cost (the step prices it after the call: `agent_runtime.spend.ModelPrices`)."""
    if usage is None or not usage.cost or not metering():
        return
    attributes = {"gen_ai.agent.name": agent}
    if request_model:
        attributes["gen_ai.request.model"] = request_model
    cost.add(usage.cost, attributes)


def record_tool_call(*, agent: str, tool: str, seconds: float) -> None:
    if not metering():
        return
    step_duration.record(
        seconds, {"agent_run.step": "execute_tool", "gen_ai.agent.name": agent, "gen_ai.tool.name": tool}
    )


def record_approval(*, agent: str, tool: str, decision: str, seconds: float) -> None:
    if not metering():
        return
    approval_latency.record(
        max(seconds, 0.0),
        {"gen_ai.agent.name": agent, "gen_ai.tool.name": tool, "agent_run.approval.decision": decision},
    )


def record_run(*, agent: str, status: str, reason: str, seconds: float) -> None:
    if not metering():
        return
    run_duration.record(max(seconds, 0.0), {"gen_ai.agent.name": agent, "agent_run.status": status})
    reason_code = reason.split(":", 1)[0][:64]  # "model_http_400: ..." -> a bounded set of values
    runs.add(
        1,
        redact_attributes(
            {"gen_ai.agent.name": agent, "agent_run.status": status, "agent_run.finish_reason": reason_code}
        ),
    )
