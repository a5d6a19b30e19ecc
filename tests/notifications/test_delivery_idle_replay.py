"""A delivery orchestration's idle wait, as the real Durable SDK replays it: histories from before (their
`deliver_next` results say nothing about looking again) wait for the wake-up alone, as they were recorded; steps of
today's code race it with a timer, so a run whose end is never recorded cannot leave it asleep for good."""

from __future__ import annotations

import json
from typing import Any

import azure.durable_functions as df

from devhost.app_loader import FunctionInfo
from devhost.invoke import invoke_orchestrator
from devhost.protocol.trigger import orchestration_trigger_json
from notifications.contracts import WAKE_EVENT, DeliveryInput
from notifications.orchestrator import notification_delivery

INSTANCE = "notify-wh1-run1"
AT = "2030-01-01T00:00:00Z"


def _history(idle_result: dict[str, Any]) -> list[dict[str, Any]]:
    """Started, one `deliver_next` scheduled and completed with `idle_result` (as Durable stores them)."""
    started = json.dumps(DeliveryInput(run_id="run1", session_id="s1", subscription="wh1").model_dump_json())
    return [
        {"EventId": -1, "IsPlayed": False, "Timestamp": AT, "EventType": 12},
        {"EventId": -1, "IsPlayed": True, "Timestamp": AT, "EventType": 0, "Name": "notification_delivery",
         "Version": "", "Input": started, "OrchestrationInstance": {"InstanceId": INSTANCE, "ExecutionId": "e1"},
         "ParentInstance": None, "Tags": None, "Correlation": None, "ParentTraceContext": None,
         "ScheduledStartTime": None, "Generation": None, "GenerateNewTrace": False},
        {"EventId": 0, "IsPlayed": True, "Timestamp": AT, "EventType": 4, "Name": "deliver_next", "Version": "",
         "Input": None, "ParentTraceContext": None, "Tags": None},
        {"EventId": -1, "IsPlayed": False, "Timestamp": AT, "EventType": 5, "TaskScheduledId": 0,
         "Result": json.dumps(idle_result)},
    ]


def _waits(idle_result: dict[str, Any]) -> list[tuple[str, str | None]]:
    """What the orchestration waits on after that step: (action type, event name) of each action, races opened."""
    events = _history(idle_result)
    trigger = orchestration_trigger_json([json.dumps(e) for e in events], input_json=events[1]["Input"],
                                         instance_id=INSTANCE, is_replaying=True, parent_instance_id=None)
    function = FunctionInfo(
        name="notification_delivery", kind="orchestration", trigger_type="orchestrationTrigger",
        trigger_param="context", bindings=[], fn=df.Orchestrator.create(notification_delivery),
        script_file="function_app.py",
    )
    output = invoke_orchestrator(function, trigger)
    assert output.error is None, output.error
    found: list[tuple[str, str | None]] = []

    def walk(action: Any) -> None:
        found.append((action.type.name, action.event_name))
        for child in action.children:
            walk(child)

    for group in output.action_groups:
        for action in group:
            walk(action)
    kinds = [kind for kind, _ in found]
    return found[kinds.index("CallActivityWithRetry") + 1:]  # after the step itself


def test_an_idle_step_of_older_code_waits_for_the_wake_up_alone() -> None:
    waits = _waits({"outcome": "idle", "final": False, "retry_in_seconds": None})
    assert waits == [("WaitForExternalEvent", WAKE_EVENT)]


def test_an_idle_step_of_today_races_the_wake_up_with_a_timer() -> None:
    waits = _waits({"outcome": "idle", "final": False, "retry_in_seconds": None, "recheck_in_seconds": 3600.0,
                    "end_missing": False})
    assert waits == [("WhenAny", None), ("WaitForExternalEvent", WAKE_EVENT), ("CreateTimer", None)]
