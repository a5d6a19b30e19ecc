"""Golden SDK episodes (captured from azure-functions-durable 1.7.0): the trigger JSON devhost builds, the real SDK's
answer through devhost's invocation layer, and devhost's C# replay of that answer against the next episode."""

from __future__ import annotations

import itertools
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import azure.durable_functions as df
import azure.functions as func
import pytest

from devhost.app_loader import FunctionIndex
from devhost.invoke import invoke_orchestrator
from devhost.protocol.actions import OrchestratorOutput
from devhost.protocol.events import EventType
from devhost.protocol.replay import ReplayContext, replay_episode
from devhost.protocol.timefmt import parse_iso
from devhost.protocol.trigger import orchestration_trigger_json
from devhost.workers.messages import OrchestratorDone, encode_frame

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "durable-protocol"


def episodes(name: str) -> list[dict[str, Any]]:
    data = json.loads((FIXTURES / f"{name}_protocol_dump.json").read_text())
    return data if isinstance(data, list) else [data]


def _golden_app() -> FunctionIndex:
    """Orchestrators that behave like the ones the fixtures were captured from."""
    app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)

    @app.orchestration_trigger(context_name="context")
    def chaining(context: df.DurableOrchestrationContext):
        results = []
        for city in ("Tokyo", "Seattle", "London"):
            results.append((yield context.call_activity("say_hello", city)))
        return results

    @app.orchestration_trigger(context_name="context")
    def approval(context: df.DurableOrchestrationContext):
        timeout_s = json.loads(context.get_input())["timeout_s"] if isinstance(context.get_input(), str) else 60
        timer = context.create_timer(context.current_utc_datetime + timedelta(seconds=timeout_s))
        event = context.wait_for_external_event("Approval")
        context.set_custom_status("waiting")
        winner = yield context.task_any([event, timer])
        if winner == event:
            timer.cancel()
            context.set_custom_status("approved")
            return {"approved": event.result, "is_str": isinstance(event.result, str)}
        return {"approved": None}

    @app.orchestration_trigger(context_name="context")
    def retry_orch(context: df.DurableOrchestrationContext):
        opts = df.RetryOptions(1000, 3)
        flaky = yield context.call_activity_with_retry("flaky", opts, {"key": context.instance_id, "fail_times": 2})
        try:
            yield context.call_activity_with_retry("always_fails", df.RetryOptions(500, 2), "x")
        except Exception as exc:
            return {"flaky": flaky, "caught": str(exc)}
        return {"flaky": flaky}

    @app.activity_trigger(input_name="x")
    def say_hello(x: str) -> str:
        return x

    @app.activity_trigger(input_name="x")
    def flaky(x: Any) -> Any:
        return x

    @app.activity_trigger(input_name="x")
    def always_fails(x: Any) -> Any:
        return x

    return FunctionIndex.from_app(app, "golden")


GOLDEN = _golden_app()
ALL = [(name, i) for name in ("chaining", "approval", "retry") for i in range(len(episodes(name)))]


@pytest.mark.parametrize(("name", "number"), ALL)
def test_trigger_json_matches_fixture_request(name: str, number: int) -> None:
    request = episodes(name)[number]["request"]
    history = request["history"]
    started = next(e for e in history if e["EventType"] == EventType.ExecutionStarted)
    built = orchestration_trigger_json(
        [json.dumps(e) for e in history], input_json=started["Input"], instance_id=request["instanceId"],
        is_replaying=started["IsPlayed"], parent_instance_id=None,
    )
    assert json.loads(built) == request


@pytest.mark.parametrize(("name", "number"), ALL)
def test_real_sdk_answer_through_devhost_invoke_matches_fixture(name: str, number: int) -> None:
    episode = episodes(name)[number]
    request = episode["request"]
    started = next(e for e in request["history"] if e["EventType"] == EventType.ExecutionStarted)
    function = GOLDEN.orchestrator(started["Name"])
    assert function is not None
    output = invoke_orchestrator(function, json.dumps(request))
    expected = OrchestratorOutput.from_state_json(json.dumps(episode["response"]))
    assert output.action_groups == expected.action_groups
    assert (output.is_done, output.custom_status_json, output.error) == (
        expected.is_done, expected.custom_status_json, expected.error)
    if expected.output_json is not None and name != "retry":  # retry's caught text embeds captured stack paths
        assert json.loads(output.output_json or "null") == json.loads(expected.output_json)


def _replay(history: list[dict[str, Any]], response: dict[str, Any]):
    ctx = ReplayContext("o", "iid", "xid", parse_iso(history[-1]["Timestamp"]), lambda kind, fn: True)
    return replay_episode(ctx, history, OrchestratorOutput.from_state_json(json.dumps(response)))


@pytest.mark.parametrize("name", ["chaining", "approval"])
def test_replay_schedules_what_the_next_episode_recorded(name: str) -> None:
    eps = episodes(name)
    for current, following in itertools.pairwise(eps):
        result = _replay(current["request"]["history"], current["response"])
        recorded = [e for e in following["request"]["history"][len(current["request"]["history"]):]
                    if e["EventType"] in (EventType.TaskScheduled, EventType.TimerCreated)]
        assert [(a.event["EventType"], a.event_id, a.event.get("Name"), a.event.get("Input"), a.event.get("FireAt"))
                for a in result.new_actions] == [
            (e["EventType"], e["EventId"], e.get("Name"), e.get("Input"), e.get("FireAt")) for e in recorded]
        assert result.completion is None
    last = _replay(eps[-1]["request"]["history"], eps[-1]["response"])
    assert last.completion is not None and last.completion.status == "Completed"
    assert json.loads(last.completion.result_json or "null") == eps[-1]["response"]["output"]


def test_retry_history_is_explained_by_retry_interceptor_including_final_dummy_timer() -> None:
    """Every TaskScheduled/TimerCreated id and FireAt of the 3+2 attempt history is re-derived (no divergence)."""
    episode = episodes("retry")[0]
    history = episode["request"]["history"]
    for completed_at in [i for i, e in enumerate(history) if e["EventType"] == EventType.OrchestratorCompleted]:
        decisions_at = completed_at
        while history[decisions_at - 1]["EventType"] in (EventType.TaskScheduled, EventType.TimerCreated):
            decisions_at -= 1
        result = _replay(history[:decisions_at], episode["response"])
        got = [(a.event["EventType"], a.event_id, a.event.get("FireAt"), a.event.get("Name"))
               for a in result.new_actions]
        assert got == [(e["EventType"], e["EventId"], e.get("FireAt"), e.get("Name"))
                       for e in history[decisions_at:completed_at]]
    final = _replay(history, episode["response"])
    assert final.completion is not None and final.completion.status == "Completed"
    timers = [e for e in history if e["EventType"] == EventType.TimerCreated]
    assert [t["EventId"] for t in timers] == [1, 3, 6, 8]


@pytest.mark.parametrize("name", ["chaining", "approval", "retry"])
def test_an_episode_parses_only_the_actions_it_does_not_repeat(name: str) -> None:
    """The SDK sends every action of the execution each episode: given the last episode's output, an action whose
    JSON text is unchanged at its place is the very object parsed then (a timer cancelled since is not), and the whole
    is what a parse from scratch gives."""
    previous: OrchestratorOutput | None = None
    reused = 0
    for episode in episodes(name):
        text = json.dumps(episode["response"])
        output = OrchestratorOutput.from_state_json(text, previous)
        assert output == OrchestratorOutput.from_state_json(text)
        if previous is not None:
            pairs = zip(output.action_groups, output.action_texts, previous.action_groups, previous.action_texts,
                        strict=False)
            for new_group, new_raw, old_group, old_raw in pairs:
                for new, raw, old, raw_before in zip(new_group, new_raw, old_group, old_raw, strict=False):
                    assert (new is old) == (raw == raw_before)
                    reused += new is old
        previous = output
    # chaining repeats its earlier calls; approval's one action changes (its timer is cancelled); retry's episodes
    # are of different executions
    assert (reused > 0) == (name == "chaining")


def test_an_action_that_changed_in_place_is_parsed_again() -> None:
    """A different action where the last episode had another (a non-deterministic orchestrator) is never the old
    one: replay must see it to fail the orchestration."""
    first, *_ = (ep for ep in episodes("chaining") if ep["response"]["actions"])
    response = first["response"]
    previous = OrchestratorOutput.from_state_json(json.dumps(response))
    changed = json.loads(json.dumps(response))
    changed["actions"][0][0]["functionName"] = "say_goodbye"
    output = OrchestratorOutput.from_state_json(json.dumps(changed), previous)
    assert output.action_groups[0][0].function_name == "say_goodbye"
    assert output == OrchestratorOutput.from_state_json(json.dumps(changed))
    broken = json.loads(json.dumps(response))
    broken["actions"][0].append({"actionType": 99})
    with pytest.raises(ValueError, match="unknown action"):
        OrchestratorOutput.from_state_json(json.dumps(broken), previous)


def test_a_worker_process_sends_the_parsed_actions_without_their_json() -> None:
    """The SDK's action JSON serves only the next episode's parse in the process that parsed it (devhost's worker
    processes parse their own): the host reads the same output from the frame, which no longer carries it twice."""
    last = episodes("chaining")[-1]
    output = OrchestratorOutput.from_state_json(json.dumps(last["response"]))
    assert output.action_texts
    frame = encode_frame(OrchestratorDone(id=7, output=output))
    received = OrchestratorDone.model_validate_json(frame[4:]).output
    assert received == output and received.action_groups == output.action_groups
    assert received.action_texts == [] and b"functionName" not in frame  # the raw JSON's key; the parsed one's differs
