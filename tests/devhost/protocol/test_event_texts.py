"""Event texts devhost derives instead of encoding again: always the text of the event they stand for."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from devhost.protocol import events as ev
from devhost.protocol.events import Event, as_played, event_text, played_text

NOW = datetime(2030, 1, 1, 0, 0, 5, 120000, tzinfo=UTC)
EVENTS: list[Event] = [
    ev.orchestrator_started(NOW), ev.orchestrator_completed(NOW),
    ev.execution_started(NOW, instance_id="i", execution_id="e", name="n", version=None, input_json='"é \\" x"'),
    ev.execution_terminated(NOW, "why"), ev.execution_suspended(NOW, None), ev.execution_resumed(NOW, "r"),
    ev.task_scheduled(NOW, 3, "f", '"x"'), ev.task_completed(NOW, 3, '{"a": "false, "}'),
    ev.task_failed(NOW, 12, "boom", "details"), ev.sub_orchestration_completed(NOW, 4, "1"),
    ev.sub_orchestration_failed(NOW, 4, "r", None), ev.timer_created(NOW, 5, NOW), ev.timer_fired(NOW, 5, "t"),
    ev.event_raised(NOW, "IsPlayed", '"false"'), ev.event_sent(NOW, 6, "@e@k", "op", "{}"),
    ev.execution_completed(NOW, 7, 1, "null"),
]


@pytest.mark.parametrize("event", EVENTS, ids=[str(e["EventType"]) for e in EVENTS])
def test_the_played_text_is_the_played_events_text(event: Event) -> None:
    expected = event_text(as_played(event))
    assert played_text(event, event_text(event)) == expected
    assert played_text(json.loads(event_text(event)), event_text(event)) == expected  # a message read back
    assert json.loads(played_text(event, json.dumps(event, separators=(",", ":")))) == as_played(event)  # (other
    # spellings: a message event is encoded again)


def test_an_event_already_played_keeps_its_text() -> None:
    played = as_played(ev.task_completed(NOW, 1, "2"))
    assert played_text(played, event_text(played)) == event_text(played)
