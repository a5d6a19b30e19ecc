"""The recorded `agent_run` histories (`golden/`), read as Durable stores them, and one episode of today's orchestrator
over such a history, through the real Durable SDK."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import azure.durable_functions as df
from agent_run_activities import ACTIVITIES

from devhost.app_loader import FunctionInfo
from devhost.invoke import OrchestratorOutput, invoke_orchestrator
from devhost.protocol.trigger import orchestration_trigger_json
from orchestrators.agent_run import agent_run

GOLDEN = Path(__file__).parent / "golden" / "agent_run_histories.jsonl.gz"
EXECUTION_COMPLETED, TASK_SCHEDULED, TASK_COMPLETED, ORCHESTRATOR_STARTED, ORCHESTRATOR_COMPLETED, EVENT_RAISED = (
    1, 4, 5, 12, 13, 15)


def cases() -> list[dict[str, Any]]:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def payload(text: str | None) -> Any:
    """A payload as the history holds it (a JSON string in a JSON string, in a one-element list for an activity)."""
    value: Any = text
    while isinstance(value, str):
        value = json.loads(value)
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
    return value


def activity_actions(groups: list[list[Any]]) -> list[tuple[str, Any]]:
    """The activities the orchestrator scheduled, in order (inside the races of compound actions too)."""
    found: list[tuple[str, Any]] = []

    def walk(action: Any) -> None:
        if action.function_name in ACTIVITIES:
            found.append((action.function_name, payload(action.input)))
        for child in action.children:
            walk(child)

    for group in groups:
        for action in group:
            walk(action)
    return found


def run_episode(case: dict[str, Any], events: list[dict[str, Any]]) -> OrchestratorOutput:
    """Today's `agent_run` over `events` of `case`'s instance: the episode whose new events end the list."""
    trigger = orchestration_trigger_json(
        [json.dumps(e) for e in events], input_json=case["input"], instance_id=case["instance_id"],
        is_replaying=True, parent_instance_id=None,
    )
    function = FunctionInfo(
        name="agent_run", kind="orchestration", trigger_type="orchestrationTrigger", trigger_param="context",
        bindings=[], fn=df.Orchestrator.create(agent_run), script_file="function_app.py",
    )
    return invoke_orchestrator(function, trigger)
