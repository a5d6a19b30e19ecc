"""The sample apps run unchanged on the engine (real SDK, real converters, virtual clock)."""

from __future__ import annotations

import json

from engine_helpers import OpenEngine, output, raw_history, run

from devhost.engine.api import RuntimeStatus
from devhost.protocol.events import EventType


async def test_chaining_returns_activity_results_in_order(open_engine: OpenEngine) -> None:
    engine = await open_engine("chaining")
    status = await run(engine, "chaining")
    assert status.runtime_status == RuntimeStatus.Completed
    assert output(status) == ["Hello Tokyo!", "Hello Seattle!", "Hello London!"]


async def test_chaining_history_shape_merges_scheduled_into_completed(open_engine: OpenEngine) -> None:
    engine = await open_engine("chaining")
    status = await run(engine, "chaining")
    shaped = await engine.get_status(status.instance_id, show_history=True, show_history_output=True)
    assert shaped is not None and shaped.history_events is not None
    kinds = [e["EventType"] for e in shaped.history_events]
    assert kinds == ["ExecutionStarted", "TaskCompleted", "TaskCompleted", "TaskCompleted", "ExecutionCompleted"]
    first = shaped.history_events[1]
    assert (first["FunctionName"], first["Result"]) == ("say_hello", "Hello Tokyo!")
    assert "TaskScheduledId" not in first and "EventId" not in first
    assert first["Input"] == '["\\"Tokyo\\""]'
    without_output = await engine.get_status(status.instance_id, show_history=True)
    assert without_output is not None and "Result" not in without_output.history_events[1]


async def test_fan_out_fan_in_keeps_result_order_and_custom_status(open_engine: OpenEngine) -> None:
    engine = await open_engine("fan_out_fan_in")
    status = await run(engine, "fan_out_fan_in", {"count": 20})
    assert output(status) == {"results": [i * i for i in range(20)], "sum": sum(i * i for i in range(20))}
    assert status.to_json()["customStatus"] == {"phase": "done"}


async def test_task_all_failure_delays_follow_up_until_all_children_finish(open_engine: OpenEngine) -> None:
    engine = await open_engine("fan_out_fan_in")
    status = await run(engine, "fan_out_with_failure")
    assert output(status) == {"caught": "Activity function 'boom' failed:  ValueError: boom x", "after": 100}
    full = await engine.get_status(status.instance_id, show_history=True)
    assert full is not None and full.history_events is not None
    completions = [e.get("FunctionName") for e in full.history_events if e["EventType"].startswith("Task")]
    # the follow-up activity ('square' with 10) is scheduled only after all three fan-out tasks finished
    assert completions[-1] == "square" and len(completions) == 4


async def test_uncaught_failure_fails_with_orchestrator_text(open_engine: OpenEngine) -> None:
    engine = await open_engine("fan_out_fan_in")
    status = await run(engine, "fan_out_uncaught")
    assert status.runtime_status == RuntimeStatus.Failed
    assert str(output(status)).startswith(
        "Orchestrator function 'fan_out_uncaught' failed: Activity function 'boom' failed:  ValueError: boom y")


async def test_human_interaction_timeout_outcome(open_engine: OpenEngine) -> None:
    engine = await open_engine("human_interaction")
    status = await run(engine, "approval", {"timeout_s": 3 * 86400})
    assert output(status) == {"approved": None, "timed_out": True}
    assert status.to_json()["customStatus"] == "timed out"


async def test_human_interaction_approved_outcome_and_client_payload_is_a_string(open_engine: OpenEngine) -> None:
    engine = await open_engine("human_interaction")
    iid = await engine.start_new("approval", None, json.dumps(json.dumps({"timeout_s": 60})))
    await engine.run_until_idle()
    await engine.raise_event(iid, "Approval", json.dumps(json.dumps({"ok": 1})))  # the Python client's encoding
    status = await engine.wait_for_status(iid, timeout=5)
    assert output(status) == {"approved": '{"ok": 1}'}  # azure-functions-durable-python#295: a str, not a dict
    webhook = await engine.start_new("approval", None, json.dumps({"timeout_s": 60}))
    await engine.run_until_idle()
    await engine.raise_event(webhook, "Approval", '{"ok":1}')  # webhook JSON body: an object
    assert output(await engine.wait_for_status(webhook, timeout=5)) == {"approved": {"ok": 1}}


async def test_uncancelled_timer_keeps_instance_running_until_it_fires(open_engine: OpenEngine) -> None:
    engine = await open_engine("human_interaction")
    iid = await engine.start_new("approval", None, json.dumps(json.dumps({"timeout_s": 60, "cancel_timer": False})))
    await engine.run_until_idle()
    await engine.raise_event(iid, "Approval", '"yes"')
    await engine.run_until_idle()
    running = await engine.get_status(iid)
    assert running is not None and running.runtime_status == RuntimeStatus.Running
    assert running.to_json()["customStatus"] == "approved"
    await engine.advance(61)
    done = await engine.get_status(iid)
    assert done is not None and done.runtime_status == RuntimeStatus.Completed and output(done) == {"approved": "yes"}


async def test_monitor_continues_as_new_until_done(open_engine: OpenEngine) -> None:
    engine = await open_engine("monitor")
    status = await run(engine, "monitor", {"max_rounds": 10})
    assert status.runtime_status == RuntimeStatus.Completed
    assert output(status) == {"rounds": 3, "status": "done"}
    assert status.to_json()["input"] == '{"max_rounds": 10, "round": 3}'
    history = await engine.get_status(status.instance_id, show_history=True)
    assert history is not None and history.history_events is not None
    assert history.history_events[0]["EventType"] == "ExecutionStarted"  # history was reset by continue-as-new
    assert sum(e["EventType"] == "ExecutionStarted" for e in history.history_events) == 1


async def test_monitor_status_between_rounds_and_new_execution_ids(open_engine: OpenEngine) -> None:
    engine = await open_engine("monitor")
    iid = await engine.start_new("monitor", None, json.dumps(json.dumps({"max_rounds": 10})))
    await engine.run_until_idle()
    first = await engine.get_status(iid)
    assert first is not None and first.runtime_status == RuntimeStatus.Running
    await engine.advance(30 * 60)
    second = await engine.get_status(iid)
    assert second is not None and second.execution_id != first.execution_id
    assert second.to_json()["input"] == '{"max_rounds": 10, "round": 1}'


async def test_retry_attempts_backoff_and_final_text(open_engine: OpenEngine) -> None:
    engine = await open_engine("retry")
    status = await run(engine, "retry_orch")
    assert output(status) == {"flaky": "ok after 3 attempts",
                              "caught": "Activity function 'always_fails' failed:  RuntimeError: permanent failure (x)"}
    raw = raw_history(engine, status.instance_id)  # white-box: TimerId is not in historyEvents
    timers = [e for e in raw if e["EventType"] == EventType.TimerFired]
    assert [t["TimerId"] for t in timers] == [1, 3, 6, 8]  # incl. the final "back-compat" timer after attempt 2


async def test_sub_orchestrations_ids_parent_and_failure(open_engine: OpenEngine) -> None:
    engine = await open_engine("sub_orchestrations")
    status = await run(engine, "parent", instance_id="p1")
    result = output(status)
    assert isinstance(result, dict)
    assert result["explicit"] == {"n": 2, "doubled": 4, "parent": "p1", "me": "p1-child"}
    assert result["auto"]["me"] == f"{status.execution_id}:1" and result["auto"]["parent"] == "p1"
    assert result["nested"]["middle"]["doubled"] == 8
    assert result["failure"].startswith("Orchestrator function 'failing_child' failed: child failed with z")
    child = await engine.get_status("p1-child")
    assert child is not None and child.parent_instance_id == "p1" and child.to_json()["input"] == '{"n": 2}'


async def test_blueprint_app_with_async_activity(open_engine: OpenEngine) -> None:
    engine = await open_engine("blueprint_app")
    status = await run(engine, "greet_all", ["a", "b", "c"])
    assert output(status) == ["Hi a", "Hi b", "Hi c"]


async def test_events_raised_before_the_first_episode_meet_the_waiters_one_by_one(open_engine: OpenEngine) -> None:
    """Not a FIFO buffer: the three events are in the first episode's history after ExecutionStarted, and the SDK
    hands each to the waiter the generator opened after taking the previous one, so they come in order. Events
    that arrive while no waiter of their name is open are NOT queued: see `test_deferred_events.py`."""
    engine = await open_engine("human_interaction")
    iid = await engine.start_new("collect_events", None, None)
    for i in range(3):
        await engine.raise_event(iid, "Item", json.dumps(i))
    status = await engine.wait_for_status(iid, timeout=5)
    assert output(status) == [0, 1, 2]
    shaped = await engine.get_status(iid, show_history=True)
    kinds = [e["EventType"] for e in shaped.history_events]
    assert kinds.index("ExecutionStarted") < kinds.index("EventRaised") and kinds.count("EventRaised") == 3


async def test_concurrent_waiters_are_lifo(open_engine: OpenEngine) -> None:
    engine = await open_engine("human_interaction")
    iid = await engine.start_new("two_waiters", None, None)
    await engine.run_until_idle()
    await engine.raise_event(iid, "Go", '"v"')
    status = await engine.wait_for_status(iid, timeout=5)
    assert output(status) == {"first_won": False, "value": "v"}


async def test_unknown_activity_fails_and_unknown_orchestrator_is_rejected(open_engine: OpenEngine) -> None:
    from devhost.engine.api import UnknownFunctionError

    engine = await open_engine("entity_counter")
    try:
        await engine.start_new("nope", None, None)
        raise AssertionError("expected UnknownFunctionError")
    except UnknownFunctionError as exc:
        assert "The function 'nope' doesn't exist" in str(exc)
    status = await run(engine, "unknown_entity_signal")
    assert status.runtime_status == RuntimeStatus.Failed
    assert "The function 'nope' doesn't exist, is disabled, or is not an entity function" in str(output(status))


async def test_first_episode_history_layout(open_engine: OpenEngine) -> None:
    engine = await open_engine("chaining")
    iid = await engine.start_new("chaining", None, None)
    await engine.run_until_idle()
    history = raw_history(engine, iid)  # reloaded from SQLite: the persisted form
    assert [e["EventType"] for e in history[:4]] == [
        EventType.OrchestratorStarted, EventType.ExecutionStarted, EventType.TaskScheduled,
        EventType.OrchestratorCompleted]
    assert history[1]["IsPlayed"] is True and history[2]["IsPlayed"] is False


async def test_large_fan_out_of_1000(open_engine: OpenEngine) -> None:
    engine = await open_engine("fan_out_fan_in")
    # Bounded generously: through the real worker every episode replays the whole history in another process.
    iid = await engine.start_new("fan_out_fan_in", None, json.dumps(json.dumps({"count": 1000})))
    status = await engine.wait_for_status(iid, timeout=300)
    assert output(status) == {"results": [i * i for i in range(1000)], "sum": sum(i * i for i in range(1000))}


async def test_auto_skip_clock_completes_a_three_day_timeout_without_advancing(open_engine: OpenEngine) -> None:
    engine = await open_engine("human_interaction", auto_skip=True)
    before = engine.now()
    iid = await engine.start_new("approval", None, json.dumps(json.dumps({"timeout_s": 3 * 86400})))
    status = await engine.wait_for_status(iid, timeout=5)  # nobody calls advance(): the engine skips when idle
    assert output(status) == {"approved": None, "timed_out": True}
    assert (engine.now() - before).total_seconds() == 3 * 86400
