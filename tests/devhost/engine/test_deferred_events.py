"""Conformance: devhost shows the Python SDK's deferred-event behaviour exactly as the Functions host + SDK do, so an
app that loses or replays events on Azure loses or replays them on devhost too (docs/durable-protocol.md §5).

The host records every raised event in the history (`EventRaised`, in arrival order) and replays that history to the
real SDK (azure-functions-durable 1.7.0). An event that meets no open waiter of its name goes to the SDK's
`deferred_tasks[name]`: a second one overwrites the first, and the entry is never removed, so every later waiter of
the name completes at once with that stale payload. One event name per expected event avoids both."""

from __future__ import annotations

import json

from engine_helpers import OpenEngine, output

from devhost.engine.api import RuntimeStatus


async def _busy_then_raise(
    open_engine: OpenEngine, orchestrator: str, names: list[str]
) -> tuple[object, str, object]:
    engine = await open_engine("human_interaction")
    iid = await engine.start_new(orchestrator, None, None)
    await engine.run_until_idle()  # the orchestrator now waits on its timer: no event waiter is open
    for n, name in enumerate(names, start=1):
        await engine.raise_event(iid, name, json.dumps(json.dumps({"n": n})))  # the Python client's encoding
    await engine.run_until_idle()
    await engine.advance(3600)
    status = await engine.wait_for_status(iid, timeout=5)
    assert status.runtime_status == RuntimeStatus.Completed
    return engine, iid, output(status)


async def test_same_name_events_before_the_waiter_overwrite_and_replay_stale(open_engine: OpenEngine) -> None:
    engine, iid, result = await _busy_then_raise(open_engine, "deferred_events", ["Item", "Item"])
    # The first waiter sees the SECOND payload only (overwrite); the second waiter, opened later, completes at once
    # with the same stale payload (the deferred entry is never removed). The first event is lost.
    second = json.dumps({"n": 2})
    assert result == {"first": second, "second": second}
    # Both events are in the history, in arrival order, before the timer fired: the loss is the SDK's, not the
    # host's (the Functions host records the same history).
    shaped = await engine.get_status(iid, show_history=True, show_history_output=True)
    history = shaped.history_events
    raised = [e for e in history if e["EventType"] == "EventRaised"]
    assert [(e["Name"], json.loads(json.loads(e["Input"]))) for e in raised] == [("Item", {"n": 1}), ("Item", {"n": 2})]
    kinds = [e["EventType"] for e in history]
    assert kinds.index("EventRaised") < kinds.index("TimerFired")


async def test_one_event_name_per_expected_event_loses_nothing(open_engine: OpenEngine) -> None:
    _, _, result = await _busy_then_raise(open_engine, "distinct_names", ["Item:1", "Item:2"])
    assert result == {"first": json.dumps({"n": 1}), "second": json.dumps({"n": 2})}
