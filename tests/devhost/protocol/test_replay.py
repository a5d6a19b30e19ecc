"""The C# replay rules (durable-protocol.md §1.4), exercised on hand-written action lists and histories."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from devhost.protocol import events as ev
from devhost.protocol.actions import Action, ActionType, OrchestratorOutput, RetryOptions
from devhost.protocol.replay import ReplayContext, ReplayResult, replay_episode

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def activity(name: str = "a", value: str = '"x"') -> Action:
    return Action(ActionType.CallActivity, function_name=name, input=value)


def timer(at: datetime, canceled: bool = False) -> Action:
    return Action(ActionType.CreateTimer, fire_at=at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), is_canceled=canceled)


def wait(name: str) -> Action:
    return Action(ActionType.WaitForExternalEvent, event_name=name)


def when_all(*children: Action) -> Action:
    return Action(ActionType.WhenAll, children=children)


def when_any(*children: Action) -> Action:
    return Action(ActionType.WhenAny, children=children)


def start() -> list[dict]:
    return [ev.orchestrator_started(T0), ev.as_played(ev.execution_started(
        T0, instance_id="i", execution_id="x", name="o", version="", input_json=None))]


def replay(history: list[dict], actions: list[Action], *, done: bool = False, error: str | None = None,
           known: set[str] | None = None, v1: bool = False) -> ReplayResult:
    output = OrchestratorOutput(is_done=done, schema_version=None if v1 else 2,
                                action_groups=[[a] for a in actions] if v1 else [actions],
                                output_json='"out"' if done else None, error=error)
    exists = (lambda kind, name: name in known) if known is not None else (lambda kind, name: True)
    ctx = ReplayContext("o", "i", "x", T0, exists)
    return replay_episode(ctx, history, output)


def test_ids_follow_invocation_order_and_event_waits_take_none() -> None:
    actions = [wait("e"), when_all(activity("a"), timer(T0 + timedelta(hours=1)), activity("b")), activity("c")]
    assert replay(start(), actions).new_actions == []  # V2 awaits each top-level action in turn
    result = replay([*start(), ev.event_raised(T0, "e", "1")], actions)
    assert [(a.kind, a.event_id) for a in result.new_actions] == [("activity", 0), ("timer", 1), ("activity", 2)]


def test_when_all_waits_for_every_child_before_follow_up_work() -> None:
    fan = when_all(activity("a"), activity("b"), activity("c"))
    history = start() + [ev.task_scheduled(T0, i, n, '"x"') for i, n in enumerate("abc")] + [
        ev.orchestrator_completed(T0), ev.orchestrator_started(T0), ev.task_failed(T0, 1, "boom", None)]
    pending = replay(history, [fan, activity("after")])
    assert pending.new_actions == [] and pending.completion is None  # 'after' not scheduled yet
    history += [ev.task_completed(T0, 0, "1"), ev.task_completed(T0, 2, "3")]
    ready = replay(history, [fan, activity("after")])
    assert [(a.name, a.event_id) for a in ready.new_actions] == [("after", 3)]


def test_uncaught_failure_is_reported_only_after_all_children_finish() -> None:
    fan = when_all(activity("a"), activity("b"))
    history = [*start(), ev.task_scheduled(T0, 0, "a", '"x"'),
               ev.task_scheduled(T0, 1, "b", '"x"'), ev.task_failed(T0, 0, "boom", None)]
    assert replay(history, [fan], error="boom").completion is None
    failed = replay([*history, ev.task_completed(T0, 1, "1")], [fan], error="boom").completion
    assert failed is not None and failed.status == "Failed"
    assert failed.result_json == "Orchestrator function 'o' failed: boom"


def test_uncancelled_timer_blocks_completion_cancelled_does_not() -> None:
    at = T0 + timedelta(minutes=5)
    history = [*start(), ev.timer_created(T0, 0, at), ev.event_raised(T0, "Approval", '"y"')]
    race = when_any(wait("Approval"), timer(at))
    assert replay(history, [race], done=True).completion is None
    cancelled = replay(history, [when_any(wait("Approval"), timer(at, canceled=True))], done=True).completion
    assert cancelled is not None and cancelled.status == "Completed" and cancelled.event_id == 1
    fired = replay([*history, ev.timer_fired(T0, 0, "x")], [race], done=True).completion
    assert fired is not None and fired.status == "Completed"


def test_external_events_are_case_insensitive_in_csharp() -> None:
    history = [*start(), ev.event_raised(T0, "APPROVAL", '"y"')]
    result = replay(history, [wait("approval"), activity("next")])
    assert [a.name for a in result.new_actions] == ["next"]


def test_non_determinism_is_detected_by_kind_and_name() -> None:
    history = [*start(), ev.task_scheduled(T0, 0, "a", '"x"')]
    assert replay(history, [activity("A")]).completion is None  # names compare case-insensitively
    renamed = replay(history, [activity("b")]).completion
    assert renamed is not None and renamed.status == "Failed"
    assert (renamed.result_json or "").startswith("Non-Deterministic workflow detected")
    assert replay(history, [timer(T0)]).completion.status == "Failed"  # type: ignore[union-attr]
    assert replay(history, []).completion.status == "Failed"  # type: ignore[union-attr]


def test_unknown_activity_fails_the_orchestration() -> None:
    result = replay(start(), [activity("missing")], known={"a"})
    assert result.completion is not None and result.completion.status == "Failed"
    assert "The function 'missing' doesn't exist, is disabled, or is not an activity function." in (
        result.completion.result_json or "")


def test_retry_timers_back_off_and_end_with_a_timer_at_now() -> None:
    opts = RetryOptions(first_retry_ms=1000, max_attempts=3, backoff=2.0)
    retry = when_all(Action(ActionType.CallActivityWithRetry, function_name="f", input='"x"', retry=opts))
    t1, t2 = T0 + timedelta(seconds=1), T0 + timedelta(seconds=3)
    history = [*start(), ev.task_scheduled(T0, 0, "f", '"x"'), ev.task_failed(T0, 0, "e1", None)]
    assert [(a.kind, a.fire_at) for a in replay(history, [retry]).new_actions] == [("timer", t1)]
    history += [ev.timer_created(T0, 1, t1), ev.orchestrator_started(t1), ev.timer_fired(t1, 1, "x"),
                ev.task_scheduled(t1, 2, "f", '"x"'), ev.task_failed(t1, 2, "e2", None)]
    assert [(a.event_id, a.fire_at) for a in replay(history, [retry]).new_actions] == [(3, t1 + timedelta(seconds=2))]
    history += [ev.timer_created(t1, 3, t2), ev.orchestrator_started(t2), ev.timer_fired(t2, 3, "x"),
                ev.task_scheduled(t2, 4, "f", '"x"'), ev.task_failed(t2, 4, "e3", None)]
    assert [(a.event_id, a.fire_at) for a in replay(history, [retry]).new_actions] == [(5, t2)]  # the dummy timer


def test_v1_schema_awaits_each_inner_array_with_when_any() -> None:
    history = [*start(), ev.task_scheduled(T0, 0, "a", '"x"'),
               ev.task_scheduled(T0, 1, "b", '"x"'), ev.task_completed(T0, 1, "1")]
    result = replay(history, [when_any(activity("a"), activity("b")), activity("c")], v1=True)
    assert [(a.name, a.event_id) for a in result.new_actions] == [("c", 2)]


def test_continue_as_new_and_sub_orchestration_ids() -> None:
    sub = Action(ActionType.CallSubOrchestrator, function_name="child", input='{"n": 1}')
    result = replay(start(), [sub])
    assert [(a.kind, a.target_instance_id, a.input) for a in result.new_actions] == [
        ("suborchestration", "x:0", '"{\\"n\\": 1}"')]
    can = replay(start(), [Action(ActionType.ContinueAsNew, input='{"round": 2}')], done=True).completion
    assert can is not None and (can.status, can.result_json) == ("ContinuedAsNew", '{"round": 2}')


def test_entity_call_without_function_hangs_signal_fails() -> None:
    call = Action(ActionType.CallEntity, instance_id="@nope@k", operation="get", input="null")
    hung = replay(start(), [call, activity("a")], known={"a"})
    assert hung.completion is None and hung.new_actions == []
    signal = Action(ActionType.SignalEntity, instance_id="@nope@k", operation="add", input="1")
    failed = replay(start(), [signal], known={"a"}).completion
    assert failed is not None and "is not an entity function" in (failed.result_json or "")


def test_entity_call_completes_on_response_named_by_request_guid() -> None:
    call = Action(ActionType.CallEntity, instance_id="@counter@k", operation="get", input="null")
    first = replay(start(), [call, activity("after")])
    sent = first.new_actions[0]
    assert sent.kind == "send_event" and sent.event["Name"] == "op" and sent.target_instance_id == "@counter@k"
    import json

    guid = json.loads(sent.input or "{}")["id"]
    history = [*start(), sent.event, ev.orchestrator_started(T0), ev.event_raised(T0, guid, '{"result":"5"}')]
    assert [a.name for a in replay(history, [call, activity("after")]).new_actions] == ["after"]


def test_failure_without_out_of_proc_state_fails_in_the_first_episode() -> None:
    output = OrchestratorOutput.from_exception(ValueError("bad trigger"))
    ctx = ReplayContext("o", "i", "x", T0, lambda kind, name: True)
    completion = replay_episode(ctx, start(), output).completion
    assert completion is not None and completion.status == "Failed"
    assert completion.result_json == "Orchestrator function 'o' failed: ValueError: bad trigger"


def test_out_of_proc_data_label_is_split_off_the_exception() -> None:
    state = '{"isDone": false, "schemaVersion": 2, "actions": [[{"actionType": 0, "functionName": "a", "input": "1"}]]}'
    output = OrchestratorOutput.from_exception(Exception(f"boom\n\n$OutOfProcData$:{state}"))
    assert output.error == "boom" and output.action_groups[0][0].function_name == "a"
