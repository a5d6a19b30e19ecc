"""The decisions an `agent_run` takes when it replays a recorded history in one go (the SDK's actions: an activity
called with retries is one action however often it was scheduled), comparable across versions of the code."""

from __future__ import annotations

from typing import Any

from golden_histories import ORCHESTRATOR_COMPLETED, run_episode

from devhost.protocol.actions import Action


def decisions(case: dict[str, Any]) -> list[list[Any]]:
    history = case["history"]
    last = max(i for i, e in enumerate(history) if e["EventType"] != ORCHESTRATOR_COMPLETED)
    output = run_episode(case, history[: last + 1])
    assert output.error is None and output.is_done, output.error
    found: list[list[Any]] = []

    def walk(action: Action) -> None:
        found.append([action.type.name, action.function_name, action.event_name, action.fire_at, action.is_canceled])
        for child in action.children:
            walk(child)

    for group in output.action_groups:
        for action in group:
            walk(action)
    return found
