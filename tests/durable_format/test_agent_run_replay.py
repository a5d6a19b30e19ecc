"""Histories in flight keep replaying after the payloads got compact (`agent_runs.wire`).

`golden/agent_run_histories.jsonl.gz` holds whole `agent_run` histories written by the code before it left default
fields out of its payloads (recorded at c079d03 by `record_agent_run_histories.py`: a 5-step run starting a session,
the session's next run, a run that waited for an approval). Today's orchestrator, through the real Durable SDK, must
replay each to the same decisions: the same activities in the same order with the same inputs (as their models read
them), and the same outcome. Today's activities must read the inputs and results written in the old shape, and the
new shape must say the same thing in fewer bytes.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import azure.durable_functions as df
import pytest
from agent_run_activities import ACTIVITIES

from agent_runs.contracts import RunInput, RunOutcome, RunProgress
from agent_runs.wire import compact_json
from devhost.app_loader import FunctionInfo
from devhost.invoke import invoke_orchestrator
from devhost.protocol.trigger import orchestration_trigger_json
from orchestrators.agent_run import agent_run

GOLDEN = Path(__file__).parent / "golden" / "agent_run_histories.jsonl.gz"
TASK_SCHEDULED, TASK_COMPLETED, EXECUTION_COMPLETED, ORCHESTRATOR_COMPLETED = 4, 5, 1, 13


def _cases() -> list[dict[str, Any]]:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def _payload(text: str | None) -> Any:
    """A payload as the history holds it (a JSON string in a JSON string, in a one-element list for an activity)."""
    value: Any = text
    while isinstance(value, str):
        value = json.loads(value)
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
    return value


def _scheduled(history: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(e["Name"], _payload(e["Input"])) for e in history if e["EventType"] == TASK_SCHEDULED]


def _results(history: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    names = {e["EventId"]: e["Name"] for e in history if e["EventType"] == TASK_SCHEDULED}
    return [(names[e["TaskScheduledId"]], _payload(e["Result"])) for e in history if e["EventType"] == TASK_COMPLETED]


def _last_episode(case: dict[str, Any]) -> str:
    """The trigger of the run's last episode: the history up to its last new event (the completion not yet written)."""
    history = case["history"]
    end = max(i for i, e in enumerate(history) if e["EventType"] not in (EXECUTION_COMPLETED, ORCHESTRATOR_COMPLETED))
    return orchestration_trigger_json(
        [json.dumps(e) for e in history[: end + 1]], input_json=case["input"], instance_id=case["instance_id"],
        is_replaying=True, parent_instance_id=None,
    )


def _activity_actions(groups: list[list[Any]]) -> list[tuple[str, Any]]:
    """The activities the orchestrator scheduled, in order (inside the races of compound actions too)."""
    found: list[tuple[str, Any]] = []

    def walk(action: Any) -> None:
        if action.function_name in ACTIVITIES:
            found.append((action.function_name, _payload(action.input)))
        for child in action.children:
            walk(child)

    for group in groups:
        for action in group:
            walk(action)
    return found


@pytest.mark.parametrize("case", _cases(), ids=lambda case: case["case"])
def test_a_history_in_the_old_shape_replays_to_the_same_decisions(case: dict[str, Any]) -> None:
    function = FunctionInfo(
        name="agent_run", kind="orchestration", trigger_type="orchestrationTrigger", trigger_param="context",
        bindings=[], fn=df.Orchestrator.create(agent_run), script_file="function_app.py",
    )
    output = invoke_orchestrator(function, _last_episode(case))
    assert output.error is None and output.is_done, output.error

    recorded, replayed = _scheduled(case["history"]), _activity_actions(output.action_groups)
    assert [name for name, _ in replayed] == [name for name, _ in recorded]
    # A model call now also says how to close the run should its answer end the loop (`ModelCallInput.close`): new
    # information, not a reshaping. The recorded answers do not close the run, so it still ends with `finish_run`.
    assert all(new.pop("close", None) is not None for name, new in replayed if name == "call_model")
    for (name, new), (_, old) in zip(replayed, recorded, strict=True):
        model = ACTIVITIES[name].input_model
        assert model.model_validate(new) == model.model_validate(old), name
        assert len(json.dumps(new)) <= len(json.dumps(old)), name
    assert sum(len(json.dumps(new)) for _, new in replayed) < sum(len(json.dumps(old)) for _, old in recorded)

    completed = next(e for e in case["history"] if e["EventType"] == EXECUTION_COMPLETED)
    assert RunOutcome.model_validate(_payload(output.output_json)) == RunOutcome.model_validate(
        _payload(completed["Result"]))
    RunProgress.model_validate(_payload(output.custom_status_json))


@pytest.mark.parametrize("case", _cases(), ids=lambda case: case["case"])
def test_activities_read_old_inputs_and_results_and_write_the_same_values_smaller(case: dict[str, Any]) -> None:
    run_input = RunInput.model_validate(_payload(case["input"]))
    assert RunInput.model_validate(compact_json(run_input)) == run_input
    assert len(json.dumps(compact_json(run_input))) < len(json.dumps(run_input.model_dump(mode="json")))
    for name, old in _scheduled(case["history"]):
        step = ACTIVITIES[name].input_model.model_validate(old)
        assert ACTIVITIES[name].input_model.model_validate(compact_json(step)) == step
    for name, old in _results(case["history"]):
        activity = ACTIVITIES[name]
        result = activity.parse(old)
        if old is not None and hasattr(result, "model_dump"):
            new = compact_json(result, activity.parse)
            assert activity.parse(new) == result
            assert len(json.dumps(new)) <= len(json.dumps(old))
