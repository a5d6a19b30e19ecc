"""Histories in flight keep replaying after the payloads got compact (`agent_runs.wire`).

`golden/agent_run_histories.jsonl.gz` holds whole `agent_run` histories written by the code before it left default
fields out of its payloads (recorded at c079d03 by `record_agent_run_histories.py`: a 5-step run starting a session,
the session's next run, a run that waited for an approval). Today's orchestrator, through the real Durable SDK, must
replay each to the same decisions: the same activities in the same order with the same inputs (as their models read
them), and the same outcome. Today's activities must read the inputs and results written in the old shape, and the
new shape must say the same thing in fewer bytes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agent_run_activities import ACTIVITIES
from golden_histories import (
    EXECUTION_COMPLETED,
    ORCHESTRATOR_COMPLETED,
    TASK_COMPLETED,
    TASK_SCHEDULED,
    activity_actions,
    cases,
    payload,
    run_episode,
)

from agent_runs.contracts import RunInput, RunOutcome, RunProgress
from agent_runs.wire import compact_json


def _scheduled(history: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(e["Name"], payload(e["Input"])) for e in history if e["EventType"] == TASK_SCHEDULED]


def _results(history: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    names = {e["EventId"]: e["Name"] for e in history if e["EventType"] == TASK_SCHEDULED}
    return [(names[e["TaskScheduledId"]], payload(e["Result"])) for e in history if e["EventType"] == TASK_COMPLETED]


def _last_episode(case: dict[str, Any]) -> list[dict[str, Any]]:
    """The history up to the run's last new event (the completion not yet written): its last episode."""
    history = case["history"]
    end = max(i for i, e in enumerate(history) if e["EventType"] not in (EXECUTION_COMPLETED, ORCHESTRATOR_COMPLETED))
    return history[: end + 1]


@pytest.mark.parametrize("case", cases(), ids=lambda case: case["case"])
def test_a_history_in_the_old_shape_replays_to_the_same_decisions(case: dict[str, Any]) -> None:
    output = run_episode(case, _last_episode(case))
    assert output.error is None and output.is_done, output.error

    recorded, replayed = _scheduled(case["history"]), activity_actions(output.action_groups)
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
    assert RunOutcome.model_validate(payload(output.output_json)) == RunOutcome.model_validate(
        payload(completed["Result"]))
    RunProgress.model_validate(payload(output.custom_status_json))


@pytest.mark.parametrize("case", cases(), ids=lambda case: case["case"])
def test_activities_read_old_inputs_and_results_and_write_the_same_values_smaller(case: dict[str, Any]) -> None:
    run_input = RunInput.model_validate(payload(case["input"]))
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
