"""durable-protocol.md §7 items not covered by the sample apps: determinism helpers, timers, retries in task_all,
sub-orchestrator retries, continue-as-new edge cases, non-determinism after a code change."""

from __future__ import annotations

import json
import sys

from engine_helpers import OpenEngine, output, raw_history, run

from devhost.engine.api import RuntimeStatus
from devhost.protocol.events import EventType


def _app_module():
    return sys.modules["function_app"]


async def test_is_replaying_sequence(open_engine: OpenEngine) -> None:
    engine = await open_engine("conformance")
    _app_module().replay_log.clear()
    await run(engine, "replaying")
    assert _app_module().replay_log == [("start", False), ("start", True), ("after1", False), ("start", True),
                                        ("after1", True), ("after2", False)]


async def test_new_uuid_and_current_time_are_stable_across_replays(open_engine: OpenEngine) -> None:
    engine = await open_engine("conformance")
    status = await run(engine, "uuids")
    first, second, _ = output(status)  # type: ignore[misc]
    history = raw_history(engine, status.instance_id)
    scheduled = [json.loads(json.loads(e["Input"])[0]) for e in history if e["EventType"] == EventType.TaskScheduled]
    assert scheduled == [first, second] and first != second


async def test_code_change_mid_flight_is_non_deterministic(open_engine: OpenEngine) -> None:
    engine = await open_engine("conformance")
    module = _app_module()
    iid = await engine.start_new("changing", None, None)
    await engine.run_until_idle()  # history: TaskScheduled(0, 'echo'), TaskCompleted, TimerCreated(1)
    module.VARIANT["first_activity"] = "other"
    try:
        await engine.raise_event(iid, "poke", "1")  # any message replays the changed code against the history
        status = await engine.wait_for_status(iid, timeout=5)
    finally:
        module.VARIANT["first_activity"] = "echo"
    assert status.runtime_status == RuntimeStatus.Failed
    assert str(output(status)).startswith("Non-Deterministic workflow detected: A previous execution of this "
                                          "orchestration scheduled an activity task with sequence ID 0 and name 'echo'")


async def test_timer_in_the_past_and_long_timer_chunking(open_engine: OpenEngine) -> None:
    engine = await open_engine("conformance")
    status = await run(engine, "timers", 7)
    assert output(status) == 7 * 86400
    history = raw_history(engine, status.instance_id)
    created = [e["FireAt"] for e in history if e["EventType"] == EventType.TimerCreated]
    # the past timer, then 7 days (> 6 d maximumShortTimerDuration) as a 3 d chunk and the 4 d remainder
    assert created == ["2029-12-31T23:00:00Z", "2030-01-04T00:00:00Z", "2030-01-08T00:00:00Z"]


async def test_sub_orchestrator_retry_inside_task_all(open_engine: OpenEngine) -> None:
    engine = await open_engine("conformance")
    status = await run(engine, "retry_in_task_all", instance_id="rt1")
    assert status.runtime_status == RuntimeStatus.Completed
    assert output(status) == ["child ok after 2", "plain"]


async def test_continue_as_new_drops_buffered_events(open_engine: OpenEngine) -> None:
    engine = await open_engine("conformance")
    iid = await engine.start_new("rounds", None, json.dumps(json.dumps({"round": 0})))
    await engine.run_until_idle()
    await engine.raise_event(iid, "X", '"stale"')
    await engine.run_until_idle()
    await engine.raise_event(iid, "go", "1")
    await engine.run_until_idle()
    waiting = await engine.get_status(iid)
    assert waiting is not None and waiting.runtime_status == RuntimeStatus.Running  # the buffered 'X' was dropped
    await engine.raise_event(iid, "X", '"fresh"')
    assert output(await engine.wait_for_status(iid, timeout=5)) == {"round": 1, "x": "fresh"}


async def test_parent_notified_only_when_child_final_execution_completes(open_engine: OpenEngine) -> None:
    engine = await open_engine("conformance")
    status = await run(engine, "parent_of_counting")
    assert output(status) == "finished at 3"
    child = await engine.get_status("counting-child")
    assert child is not None and child.runtime_status == RuntimeStatus.Completed and child.to_json()["input"] == "3"


async def test_terminated_child_fails_the_parent_task(open_engine: OpenEngine) -> None:
    engine = await open_engine("conformance")
    iid = await engine.start_new("parent_of_waiting", None, None)
    await engine.run_until_idle()
    await engine.terminate("waiting-child", "stop child")
    status = await engine.wait_for_status(iid, timeout=5)
    assert output(status) == "child failed: stop"


async def test_event_raised_during_continue_as_new_reaches_the_new_execution(open_engine: OpenEngine) -> None:
    engine = await open_engine("conformance")
    iid = await engine.start_new("rounds", None, json.dumps(json.dumps({"round": 0})))
    await engine.run_until_idle()
    rt = engine._rt  # white-box: queue 'go' and 'X' so that both are in the inbox when the 'go' episode runs
    await engine.raise_event(iid, "go", "1")
    episode_messages = rt.inbox.visible.get(iid, [])
    assert len(episode_messages) == 1
    await rt.episodes.run(iid)  # continue-as-new committed; the new ExecutionStarted is queued
    await engine.raise_event(iid, "X", '"after"')
    rt.inbox.visible[iid].sort(key=lambda m: -m.id)  # deliver the X event *before* ExecutionStarted in the batch
    status = await engine.wait_for_status(iid, timeout=5)
    assert output(status) == {"round": 1, "x": "after"}
    history = raw_history(engine, iid)
    assert [e["EventType"] for e in history[:3]] == [EventType.OrchestratorStarted, EventType.ExecutionStarted,
                                                     EventType.EventRaised]


async def test_all_json_types_custom_classes_and_function_objects(open_engine: OpenEngine) -> None:
    engine = await open_engine("conformance")
    status = await run(engine, "all_types")
    assert output(status) == {"same": True, "by_builder": "by function object", "point": [11, 22],
                              "point_type": "Point"}


async def test_unknown_activity_and_sub_orchestrator_fail_the_orchestration(open_engine: OpenEngine) -> None:
    engine = await open_engine("conformance")
    for name, kind, missing in [("unknown_activity", "activity", "no_such_activity"),
                                ("unknown_sub_orchestrator", "orchestrator", "no_such_orchestrator")]:
        status = await run(engine, name)
        assert status.runtime_status == RuntimeStatus.Failed
        assert str(output(status)).startswith(
            f"Orchestrator function '{name}' failed: The function '{missing}' doesn't exist, is disabled, or is not "
            f"an {kind} function.")


async def test_sys_exit_in_user_code_fails_the_task_not_the_host(open_engine: OpenEngine) -> None:
    engine = await open_engine("conformance")
    status = await run(engine, "exiting")
    assert output(status) == "Activity function 'exits' failed:  SystemExit: 3"
    assert (await run(engine, "uuids")).runtime_status == RuntimeStatus.Completed  # the engine still runs
