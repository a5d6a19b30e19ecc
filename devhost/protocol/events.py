"""DTFx history events as the extension serialises them (`JArray.FromObject`, Newtonsoft defaults).

Events are plain dicts with PascalCase keys in the DataContract order, enums as ints and explicit nulls, so that
`json.dumps(event)` is the exact JSON the SDK receives. Builders below fill every field the SDK or the status API
reads (durable-protocol.md §1.2).
"""

from __future__ import annotations

from datetime import datetime
from enum import IntEnum
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

from devhost.protocol.jsontext import spaced_json
from devhost.protocol.timefmt import dotnet_iso

Event = dict[str, Any]


class EventType(IntEnum):
    ExecutionStarted = 0
    ExecutionCompleted = 1
    ExecutionFailed = 2
    ExecutionTerminated = 3
    TaskScheduled = 4
    TaskCompleted = 5
    TaskFailed = 6
    SubOrchestrationInstanceCreated = 7
    SubOrchestrationInstanceCompleted = 8
    SubOrchestrationInstanceFailed = 9
    TimerCreated = 10
    TimerFired = 11
    OrchestratorStarted = 12
    OrchestratorCompleted = 13
    EventSent = 14
    EventRaised = 15
    ContinueAsNew = 16
    GenericEvent = 17
    HistoryState = 18
    ExecutionSuspended = 19
    ExecutionResumed = 20
    ExecutionRewound = 21


# DTFx `OrchestrationStatus` values (ExecutionCompleted.OrchestrationStatus) and their names.
ORCHESTRATION_STATUS_NAMES = {0: "Running", 1: "Completed", 2: "ContinuedAsNew", 3: "Failed", 4: "Canceled",
                              5: "Terminated", 6: "Pending", 7: "Suspended"}

# Events that arrive as messages (IsPlayed becomes true once an episode has processed them).
MESSAGE_TYPES = frozenset(
    {
        EventType.ExecutionStarted,
        EventType.ExecutionTerminated,
        EventType.TaskCompleted,
        EventType.TaskFailed,
        EventType.SubOrchestrationInstanceCompleted,
        EventType.SubOrchestrationInstanceFailed,
        EventType.TimerFired,
        EventType.EventRaised,
        EventType.ExecutionSuspended,
        EventType.ExecutionResumed,
    }
)


def event_text(event: Event) -> str:
    """The event's JSON text (`json.dumps(event, ensure_ascii=False)`), as the extension sends it and the store keeps
    it."""
    return spaced_json(event)


def _base(event_type: EventType, timestamp: datetime, event_id: int = -1, played: bool = False) -> Event:
    return {"EventId": event_id, "IsPlayed": played, "Timestamp": dotnet_iso(timestamp), "EventType": int(event_type)}


def orchestrator_started(ts: datetime) -> Event:
    return _base(EventType.OrchestratorStarted, ts)


def orchestrator_completed(ts: datetime) -> Event:
    return _base(EventType.OrchestratorCompleted, ts)


def execution_started(
    ts: datetime,
    *,
    instance_id: str,
    execution_id: str,
    name: str,
    version: str | None,
    input_json: str | None,
    parent: dict[str, Any] | None = None,
) -> Event:
    """`parent` is `{"Name","Version","TaskScheduleId","OrchestrationInstance":{"InstanceId","ExecutionId"}}`."""
    event = _base(EventType.ExecutionStarted, ts)
    event.update(
        {
            "OrchestrationInstance": {"InstanceId": instance_id, "ExecutionId": execution_id},
            "ParentInstance": parent,
            "Name": name,
            "Version": version or "",
            "Input": input_json,
            "Tags": None,
            "Correlation": None,
            "ParentTraceContext": None,
            "ScheduledStartTime": None,
            "Generation": None,
            "GenerateNewTrace": False,
        }
    )
    return event


def execution_completed(ts: datetime, event_id: int, status_code: int, result: str | None) -> Event:
    event = _base(EventType.ExecutionCompleted, ts, event_id)
    event.update({"OrchestrationStatus": status_code, "Result": result, "FailureDetails": None})
    return event


def continue_as_new(ts: datetime, event_id: int, result: str | None) -> Event:
    event = _base(EventType.ContinueAsNew, ts, event_id)
    event.update({"OrchestrationStatus": 2, "Result": result, "FailureDetails": None})
    return event


def execution_terminated(ts: datetime, reason: str | None) -> Event:
    event = _base(EventType.ExecutionTerminated, ts)
    event["Input"] = reason
    return event


def execution_suspended(ts: datetime, reason: str | None) -> Event:
    event = _base(EventType.ExecutionSuspended, ts)
    event["Reason"] = reason
    return event


def execution_resumed(ts: datetime, reason: str | None) -> Event:
    event = _base(EventType.ExecutionResumed, ts)
    event["Reason"] = reason
    return event


def task_scheduled(ts: datetime, event_id: int, name: str, input_json: str | None) -> Event:
    """`Input` is the JSON array of the parameters (`["\\"Tokyo\\""]`): the action's input string, wrapped."""
    event = _base(EventType.TaskScheduled, ts, event_id)
    event.update(
        {
            "Name": name,
            "Version": "",
            "Input": f"[{encode_basestring_ascii(input_json)}]" if input_json is not None else "[]",  # json.dumps([x])
            "ParentTraceContext": None,
            "Tags": None,
        }
    )
    return event


def _completed(kind: EventType, ts: datetime, scheduled_id: int, result: str | None) -> Event:
    event = _base(kind, ts)
    event.update({"TaskScheduledId": scheduled_id, "Result": result})
    return event


def _failed(kind: EventType, ts: datetime, scheduled_id: int, reason: str, details: str | None) -> Event:
    event = _base(kind, ts)
    event.update({"TaskScheduledId": scheduled_id, "Reason": reason, "Details": details, "FailureDetails": None})
    return event


def task_completed(ts: datetime, scheduled_id: int, result: str | None) -> Event:
    return _completed(EventType.TaskCompleted, ts, scheduled_id, result)


def task_failed(ts: datetime, scheduled_id: int, reason: str, details: str | None) -> Event:
    return _failed(EventType.TaskFailed, ts, scheduled_id, reason, details)


def sub_orchestration_created(
    ts: datetime, event_id: int, name: str, version: str | None, instance_id: str, input_json: str | None
) -> Event:
    event = _base(EventType.SubOrchestrationInstanceCreated, ts, event_id)
    event.update(
        {
            "Name": name,
            "Version": version or "",
            "InstanceId": instance_id,
            "Input": input_json,
            "ClientSpanId": None,
            "Tags": None,
        }
    )
    return event


def sub_orchestration_completed(ts: datetime, scheduled_id: int, result: str | None) -> Event:
    return _completed(EventType.SubOrchestrationInstanceCompleted, ts, scheduled_id, result)


def sub_orchestration_failed(ts: datetime, scheduled_id: int, reason: str, details: str | None) -> Event:
    return _failed(EventType.SubOrchestrationInstanceFailed, ts, scheduled_id, reason, details)


def timer_created(ts: datetime, event_id: int, fire_at: datetime) -> Event:
    event = _base(EventType.TimerCreated, ts, event_id)
    event["FireAt"] = dotnet_iso(fire_at)
    return event


def timer_fired(ts: datetime, timer_id: int, fire_at: str) -> Event:
    event = _base(EventType.TimerFired, ts)
    event.update({"TimerId": timer_id, "FireAt": fire_at})
    return event


def event_sent(ts: datetime, event_id: int, target: str, name: str, input_json: str | None) -> Event:
    event = _base(EventType.EventSent, ts, event_id)
    event.update({"InstanceId": target, "Name": name, "Input": input_json})
    return event


def event_raised(ts: datetime, name: str, input_json: str | None) -> Event:
    event = _base(EventType.EventRaised, ts)
    event.update({"Name": name, "Input": input_json, "ParentTraceContext": None})
    return event


def played_text(event: Event, text: str) -> str:
    """The text of `as_played(event)`, given `text`, the event's own text (`event_text(event)`, or the text stored
    for it): a message event's `"IsPlayed": false`, its second member as the builders write it, turned true instead of
    encoding the whole event again. Any other spelling is encoded again."""
    if event["EventType"] not in MESSAGE_TYPES or event["IsPlayed"]:
        return text
    head = f'{{"EventId": {event["EventId"]}, "IsPlayed": '
    if text.startswith(head) and text.startswith("false, ", len(head)):
        return f"{head}true{text[len(head) + 5:]}"
    return event_text(as_played(event))


def as_played(event: Event) -> Event:
    """The event as Azure Storage persists it after an episode processed it (message events: IsPlayed=true)."""
    if event["EventType"] in MESSAGE_TYPES and not event["IsPlayed"]:
        event = dict(event)
        event["IsPlayed"] = True
    return event
