"""In-memory mirror of the store: instances (with cached history), the inbox (visible messages + timer heap)."""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass, field

from devhost.engine.models import RuntimeStatus
from devhost.engine.store import InboxMessage, InstanceRow
from devhost.protocol.events import Event, EventType
from devhost.protocol.replay import ReplayState

_RESULT_EVENTS = {EventType.TaskCompleted, EventType.TaskFailed, EventType.SubOrchestrationInstanceCompleted,
                  EventType.SubOrchestrationInstanceFailed}


@dataclass
class Instance:
    row: InstanceRow
    # Current execution's history (dicts for the replay, texts for the trigger JSON); None until first needed.
    history: list[Event] | None = None
    history_texts: list[str] | None = None
    # Sequence ids already completed in this execution's history (duplicate deliveries are dropped against it).
    completed_ids: set[int] = field(default_factory=set)
    # The replay of the history so far, continued by the next episode (memory only: after a restart the first
    # episode replays from scratch). Valid only for `history` as it is: whatever replaces it drops this.
    replay_state: ReplayState | None = None

    @property
    def status(self) -> RuntimeStatus:
        return RuntimeStatus(self.row.status)

    def forget_history(self) -> None:
        """Drop the cached history of a finished instance (reloaded from the store if a status query asks)."""
        self.history = self.history_texts = None
        self.replay_state = None

    def loaded_history(self) -> tuple[list[Event], list[str]]:
        """The cached history (events, texts): an episode loads it before it runs, so a missing one is an engine bug."""
        if self.history is None or self.history_texts is None:
            raise RuntimeError(f"the history of {self.row.instance_id!r} is not loaded")
        return self.history, self.history_texts

    def set_history(self, texts: list[str]) -> None:
        self.history_texts = texts
        self.history = [json.loads(t) for t in texts]
        self.replay_state = None
        self.completed_ids = {i for i in map(completion_id, self.history) if i is not None}


def completion_id(event: Event) -> int | None:
    """The sequence id a completion event resolves (None for other events)."""
    kind = event.get("EventType")
    if kind == EventType.TimerFired:
        return event.get("TimerId")
    if kind in _RESULT_EVENTS:
        return event.get("TaskScheduledId")
    return None


@dataclass
class Inbox:
    """Messages per instance that are visible now, and future ones (timers, retries) in a heap."""

    visible: dict[str, list[InboxMessage]] = field(default_factory=dict)
    timers: list[tuple[float, int, InboxMessage]] = field(default_factory=list)

    def add(self, message: InboxMessage, now: float) -> bool:
        """Returns True if the message is visible now."""
        if message.visible_at is not None and message.visible_at > now:
            heapq.heappush(self.timers, (message.visible_at, message.id, message))
            return False
        self.visible.setdefault(message.instance_id, []).append(message)
        return True

    def release_due(self, now: float) -> set[str]:
        """Move due timers to the visible lists; returns the instances that got messages."""
        touched: set[str] = set()
        while self.timers and self.timers[0][0] <= now:
            _, _, message = heapq.heappop(self.timers)
            self.visible.setdefault(message.instance_id, []).append(message)
            touched.add(message.instance_id)
        return touched

    def next_due(self) -> float | None:
        return self.timers[0][0] if self.timers else None

    def take(self, instance_id: str, limit: int | None = None) -> list[InboxMessage]:
        messages = self.visible.get(instance_id)
        if not messages:
            return []
        if limit is None or len(messages) <= limit:
            del self.visible[instance_id]
            return messages
        taken, self.visible[instance_id] = messages[:limit], messages[limit:]
        return taken

    def put_back(self, instance_id: str, messages: list[InboxMessage]) -> None:
        """Return held messages (suspended instance) ahead of newer ones, keeping arrival order."""
        if messages:
            self.visible[instance_id] = messages + self.visible.get(instance_id, [])

    def count(self, instance_id: str) -> int:
        return len(self.visible.get(instance_id, ()))

    def drop_instance(self, instance_id: str) -> None:
        self.visible.pop(instance_id, None)
        self.timers = [t for t in self.timers if t[2].instance_id != instance_id]
        heapq.heapify(self.timers)
