"""The race between a cancel and the model call that closed the run, replayed through the real Durable SDK.

`call_model` closes the run when its answer ends the loop (`ClosedModelTurn`). A cancel event can still reach the
orchestrator before that call's completion: the cancel wins the race, the orchestrator waits for the call in flight
(the cancel's grace period) and then sees that the run is closed already. The store keeps the first finish, so the
run ended as the call closed it: the orchestration must say the same, and schedule no `finish_run`. Given an answer
that did not close the run, the same race ends the run `cancelled` in `finish_run`, as before.

The histories are a recorded 5-step run (`golden/`) cut before its last model call completed, then given the cancel
(once, or twice: a client that repeats its request) and that completion in one episode, as the engine would deliver
them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from golden_histories import (
    EVENT_RAISED,
    ORCHESTRATOR_COMPLETED,
    ORCHESTRATOR_STARTED,
    TASK_COMPLETED,
    TASK_SCHEDULED,
    activity_actions,
    cases,
    payload,
    run_episode,
)

from agent_runs.contracts import ClosedModelTurn, FinishResult, RunOutcome
from agent_runtime.loop_types import ModelTurn
from devhost.invoke import OrchestratorOutput


def _cancel_then_answer(answer: dict[str, Any], cancels: int = 1) -> OrchestratorOutput:
    """The 5-step run, its last model call answered with `answer` just after `cancels` cancel events arrived."""
    case = next(c for c in cases() if c["case"] == "five_steps_new_session")
    history = case["history"]
    last_call = max(i for i, e in enumerate(history) if e["EventType"] == TASK_SCHEDULED and e["Name"] == "call_model")
    stamp = history[last_call]["Timestamp"]
    cancel = {"EventId": -1, "IsPlayed": False, "Timestamp": stamp, "EventType": EVENT_RAISED, "Name": "cancel",
              "Input": json.dumps(json.dumps({"reason": "stop it"})), "ParentTraceContext": None}
    events = [
        *history[: last_call + 1],
        {"EventId": -1, "IsPlayed": False, "Timestamp": stamp, "EventType": ORCHESTRATOR_COMPLETED},
        {"EventId": -1, "IsPlayed": False, "Timestamp": stamp, "EventType": ORCHESTRATOR_STARTED},
        *[cancel] * cancels,
        {"EventId": -1, "IsPlayed": False, "Timestamp": stamp, "EventType": TASK_COMPLETED,
         "TaskScheduledId": history[last_call]["EventId"], "Result": json.dumps(answer)},
    ]
    output = run_episode(case, events)
    assert output.error is None, output.error
    return output


def _new_activities(output: OrchestratorOutput) -> list[str]:
    """The activities scheduled by the episode (the history's 5 steps are replayed first)."""
    return [name for name, _ in activity_actions(output.action_groups)][5:]


@pytest.mark.parametrize("cancels", [1, 2], ids=["a cancel", "two cancels"])
def test_a_cancel_that_wins_the_race_with_the_call_that_closed_the_run_ends_it_as_closed(cancels: int) -> None:
    closed = ClosedModelTurn(
        turn=ModelTurn(finish_reason="stop"), finished=FinishResult(status="completed", reason="stop")
    )
    output = _cancel_then_answer(closed.model_dump(mode="json"), cancels)

    assert output.is_done
    outcome = RunOutcome.model_validate(payload(output.output_json))
    assert (outcome.status, outcome.reason) == ("completed", "stop")
    assert "finish_run" not in _new_activities(output)


@pytest.mark.parametrize("cancels", [1, 2], ids=["a cancel", "two cancels"])
def test_a_cancel_that_wins_the_race_with_an_answer_that_did_not_close_the_run_cancels_it(cancels: int) -> None:
    output = _cancel_then_answer(ModelTurn(finish_reason="stop").model_dump(mode="json"), cancels)

    assert not output.is_done
    [(name, step)] = [(n, s) for n, s in activity_actions(output.action_groups)][5:]
    assert name == "finish_run"
    assert (step["finish"]["status"], step["finish"]["reason"]) == ("cancelled", "stop it")
