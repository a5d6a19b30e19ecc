"""Racing external events (and a timer) against work, many times in one orchestration, so that none is lost.

Two facts shape this module (docs/durable-protocol.md §1.4 and §5):
- The Functions host replays a Python orchestration by awaiting, one after the other, the tasks the generator
  yielded, and a `task_any` compound carries only the tasks that were not scheduled before. A waiter or timer shared
  by two races is therefore missing from the second one on the host's side: if it is what ends that race, the host
  never gets past it and the orchestration hangs (devhost replays the same way). So every race gets fresh waiters.
- The Python SDK (azure-functions-durable 1.7) hands an event to the LATEST open waiter of its name; waiters that
  lost a race stay open, so an event that arrives while no race is on completes one of them (`take`/`rung` find it).
  An event that arrives while no waiter of its name is open is deferred in a dict keyed by name: a second one
  overwrites the first, and the entry completes every later waiter of that name with the same payload. A name that
  can carry several meaningful events therefore loses or replays them.

Hence the rule: an event name announces ONE thing. `ExternalEvents` is for sticky signals where any one event means
the same (cancel); `Doorbells` is for many expected events, each under its own name (one per approval), which ring
and are then read from the store, the source of truth, by an activity.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
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

    def received(self) -> bool:
        """Whether an event arrived that was not taken yet (it is left for `take`)."""
        return any(waiter.is_completed and index not in self._handled for index, waiter in enumerate(self._waiters))

    def take(self) -> dict[str, Any] | None:
        """The payload of the oldest received event not handled yet (now handled), or None."""
        for index, waiter in enumerate(self._waiters):
            if waiter.is_completed and index not in self._handled:
                self._handled.add(index)
                return event_data(waiter)
        return None


class Doorbells:
    """One event name per key (`name_of(key)`), each announcing that the key's state changed in the store.

    `waiters(keys)` opens a fresh waiter per key for one race; `rung(keys)` says which keys rang since they were last
    taken (whether the event completed that race's waiter, or an older one while no race was on). A key whose bell
    rang without the store confirming anything can be `silence`d: no waiter is opened for it again, because an event
    deferred by the SDK would complete every new waiter of its name at once (an endless loop of reads); its state is
    still read whenever another key rings, and by whatever ends the wait (a deadline)."""

    def __init__(self, context: df.DurableOrchestrationContext, name_of: Callable[[str], str]) -> None:
        self._context = context
        self._name_of = name_of
        self._waiters: dict[str, list[TaskBase]] = {}
        self._taken: set[int] = set()
        self._silenced: set[str] = set()

    def waiters(self, keys: Iterable[str]) -> list[TaskBase]:
        fresh: list[TaskBase] = []
        for key in keys:
            if key in self._silenced:
                continue
            waiter = self._context.wait_for_external_event(self._name_of(key))
            self._waiters.setdefault(key, []).append(waiter)
            fresh.append(waiter)
        return fresh

    def rung(self, keys: Iterable[str]) -> list[str]:
        """The keys (of `keys`, in that order) with an event not taken yet; their events are taken now."""
        rung: list[str] = []
        for key in keys:
            completed = [w for w in self._waiters.get(key, []) if w.is_completed and id(w) not in self._taken]
            if completed:
                self._taken.update(id(w) for w in completed)
                rung.append(key)
        return rung

    def silence(self, keys: Iterable[str]) -> None:
        self._silenced.update(keys)


def event_data(task: TaskBase) -> dict[str, Any]:
    """External event payloads arrive as a dict (webhook) or as JSON text (the Python client sends a str)."""
    value = task.result
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError:
            return {}
    return value if isinstance(value, dict) else {}
