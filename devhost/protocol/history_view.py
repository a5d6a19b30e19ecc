"""`historyEvents` of the status payload (`showHistory`): the extension's shaping of the raw history."""

from __future__ import annotations

from typing import Any

from devhost.protocol.events import Event, EventType
from devhost.protocol.timefmt import parse_iso, status_time

_HIDDEN = {EventType.OrchestratorStarted, EventType.OrchestratorCompleted}
_MERGED_INTO = {
    EventType.TaskCompleted: EventType.TaskScheduled,
    EventType.TaskFailed: EventType.TaskScheduled,
    EventType.SubOrchestrationInstanceCompleted: EventType.SubOrchestrationInstanceCreated,
    EventType.SubOrchestrationInstanceFailed: EventType.SubOrchestrationInstanceCreated,
}
_OUTPUT_FIELDS = ("Result", "Output")


def shape_history(history: list[Event], *, show_output: bool) -> list[dict[str, Any]]:
    """Orchestrator* events removed, TaskScheduled/SubOrchestrationInstanceCreated merged into their completion
    (`FunctionName`, `ScheduledTime`, `Input`), `EventId`/`IsPlayed` dropped, `EventType` as a name; results only
    with `showHistoryOutput`."""
    scheduled: dict[tuple[EventType, int], Event] = {}
    for event in history:
        kind = EventType(event["EventType"])
        if kind in (EventType.TaskScheduled, EventType.SubOrchestrationInstanceCreated):
            scheduled[(kind, event["EventId"])] = event
    shaped: list[dict[str, Any]] = []
    for event in history:
        kind = EventType(event["EventType"])
        if kind in _HIDDEN or kind in (EventType.TaskScheduled, EventType.SubOrchestrationInstanceCreated):
            continue
        item: dict[str, Any] = {"EventType": kind.name}
        for field, value in event.items():
            if field in ("EventId", "IsPlayed", "EventType"):
                continue
            if field in _OUTPUT_FIELDS and not show_output:
                continue
            item[field] = value
        item["Timestamp"] = status_time(parse_iso(event["Timestamp"]))
        source_kind = _MERGED_INTO.get(kind)
        if source_kind is not None:
            source = scheduled.get((source_kind, event.get("TaskScheduledId", -1)))
            if source is not None:
                item["FunctionName"] = source.get("Name")
                item["ScheduledTime"] = status_time(parse_iso(source["Timestamp"]))
                if show_output:
                    item["Input"] = source.get("Input")
        if kind == EventType.ExecutionStarted:
            item["FunctionName"] = event.get("Name")
        shaped.append(item)
    return shaped
