"""Racing an external event (and a timer) against work, many times in one orchestration, so that it replays.

The Functions host replays a Python orchestration by awaiting, one after the other, the tasks the generator yielded,
and a `task_any` compound carries only the tasks that were not scheduled before. A waiter or timer shared by two
races is therefore missing from the second one on the host's side: if it is what ends that race, the host never gets
past it and the orchestration hangs (devhost replays the same way). So every race gets fresh waiters and a fresh
timer. An event that arrives while no race is on completes the most recent waiter, an old one that lost its race
(the host and the SDK both hand an event to the latest waiter); `take` finds such events, so none is lost.
"""

from __future__ import annotations

import json
from typing import Any

import azure.durable_functions as df
from azure.durable_functions.models.Task import TaskBase


class ExternalEvents:
    """The waiters created for one event name, and which of the events they received were handled."""

    def __init__(self, context: df.DurableOrchestrationContext, name: str) -> None:
        self._context = context
        self._name = name
        self._waiters: list[TaskBase] = []
        self._handled: set[int] = set()

    def waiter(self) -> TaskBase:
        """A new waiter, for one race."""
        waiter = self._context.wait_for_external_event(self._name)
        self._waiters.append(waiter)
        return waiter

    def take(self) -> dict[str, Any] | None:
        """The payload of the oldest received event not handled yet (now handled), or None."""
        for index, waiter in enumerate(self._waiters):
            if waiter.is_completed and index not in self._handled:
                self._handled.add(index)
                return event_data(waiter)
        return None


def event_data(task: TaskBase) -> dict[str, Any]:
    """External event payloads arrive as a dict (webhook) or as JSON text (the Python client sends a str)."""
    value = task.result
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError:
            return {}
    return value if isinstance(value, dict) else {}
