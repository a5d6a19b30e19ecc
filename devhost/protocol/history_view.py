"""`historyEvents` of the status payload (`showHistory`), shaped like DurableClient.GetDurableOrchestrationStatusAsync:
Orchestrator* events removed, completed TaskScheduled / SubOrchestrationInstanceCreated merged into their completion,
`EventId`/`IsPlayed` dropped, `EventType` and `OrchestrationStatus` as names, results parsed (`showHistoryOutput`)."""

from __future__ import annotations

from typing import Any

from devhost.protocol.actions import parse_to_jtoken
from devhost.protocol.events import ORCHESTRATION_STATUS_NAMES, Event, EventType

_HIDDEN = {EventType.OrchestratorStarted, EventType.OrchestratorCompleted}
_SCHEDULING = {EventType.TaskScheduled, EventType.SubOrchestrationInstanceCreated}
_MERGED_INTO = {
    EventType.TaskCompleted: EventType.TaskScheduled,
    EventType.TaskFailed: EventType.TaskScheduled,
    EventType.SubOrchestrationInstanceCompleted: EventType.SubOrchestrationInstanceCreated,
    EventType.SubOrchestrationInstanceFailed: EventType.SubOrchestrationInstanceCreated,
}
_WITH_RESULT = {EventType.TaskCompleted, EventType.SubOrchestrationInstanceCompleted, EventType.ExecutionCompleted}


def shape_history(history: list[Event], *, show_output: bool, show_input: bool = True) -> list[dict[str, Any]]:
    scheduled: dict[tuple[EventType, int], Event] = {}
    completed: set[tuple[EventType, int]] = set()
    for event in history:
        kind = EventType(event["EventType"])
        if kind in _SCHEDULING:
            scheduled[(kind, event["EventId"])] = event
        elif kind in _MERGED_INTO:
            completed.add((_MERGED_INTO[kind], event.get("TaskScheduledId", -1)))
    shaped = []
    for event in history:
        kind = EventType(event["EventType"])
        if kind in _HIDDEN or (kind in _SCHEDULING and (kind, event["EventId"]) in completed):
            continue
        shaped.append(_shape(event, kind, scheduled, show_output=show_output, show_input=show_input))
    return shaped


def _shape(event: Event, kind: EventType, scheduled: dict[tuple[EventType, int], Event], *, show_output: bool,
           show_input: bool) -> dict[str, Any]:
    item: dict[str, Any] = {k: v for k, v in event.items() if k not in ("EventId", "IsPlayed")}
    item["EventType"] = kind.name
    if kind == EventType.ExecutionStarted:
        item["FunctionName"] = item.pop("Name", None)
        for field in ("OrchestrationInstance", "ParentInstance", "Version", "Tags"):
            item.pop(field, None)
    elif kind in _SCHEDULING:
        item.pop("Name", None)
        item.pop("Version", None)
    elif kind in _MERGED_INTO:
        source = scheduled.get((_MERGED_INTO[kind], item.pop("TaskScheduledId", -1)))
        if source is not None:
            item["FunctionName"] = source.get("Name")
            item["ScheduledTime"] = source.get("Timestamp")
            item["Input"] = source.get("Input")
    elif kind == EventType.TimerFired:
        item.pop("TimerId", None)
    if kind == EventType.ExecutionCompleted:
        item["OrchestrationStatus"] = ORCHESTRATION_STATUS_NAMES.get(item.get("OrchestrationStatus", -1), item.get(
            "OrchestrationStatus"))
    if kind in _WITH_RESULT:
        if show_output:
            item["Result"] = parse_to_jtoken(item.get("Result"))
        else:
            item.pop("Result", None)
    if not show_input:
        item.pop("Input", None)
    return item
