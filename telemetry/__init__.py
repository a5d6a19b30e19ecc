"""OpenTelemetry for agent runs: configuration from the standard environment, GenAI semantic-convention spans, one
trace per run across activities, restarts and long approval waits, and metrics (tokens, cost, durations, outcomes).

Spans and metrics are recorded only in activities (never in orchestrator code, which Durable replays), so a replay
creates nothing. With nothing configured the OpenTelemetry API is a no-op and nothing is exported.
"""

from telemetry.setup import configure_telemetry
from telemetry.trace_context import RunTrace

__all__ = ["RunTrace", "configure_telemetry"]
