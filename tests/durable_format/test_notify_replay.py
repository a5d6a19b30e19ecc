"""Runs with notifications in flight keep replaying after a failing recording started to race cancel and to give up
(`notifications.hooks`: only runs started since, whose input says so).

`golden/notify_histories.jsonl.gz` holds an `agent_run` history written by the code before (recorded at 0294b95 by
`record_notify_histories.py`), with the decisions that code takes when it replays it: the run's approval recording
failed and waited on its durable timer, a cancel arrived during that wait (the old code did not race it), the
recording then held and the run ended `cancelled`. Today's orchestrator, through the real Durable SDK, must replay it
to the same decisions: racing that cancel (as runs started now do) would end the wait early and call `finish_run`
where the history holds `notify_run`.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from golden_histories import EVENT_RAISED, EXECUTION_COMPLETED, payload
from notify_replay import decisions

from agent_runs.contracts import RunInput, RunOutcome

GOLDEN = Path(__file__).parent / "golden" / "notify_histories.jsonl.gz"


def _cases() -> list[dict[str, Any]]:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


@pytest.mark.parametrize("case", _cases(), ids=lambda case: case["case"])
def test_a_run_started_before_replays_its_failing_recording_to_the_same_decisions(case: dict[str, Any]) -> None:
    run_input = RunInput.model_validate(payload(case["input"]))
    assert run_input.notify and not run_input.notify_gives_up  # started before: the flag is not in its input
    assert any(e["EventType"] == EVENT_RAISED and e["Name"] == "cancel" for e in case["history"])

    assert decisions(case) == case["decisions"]
    called = [name for kind, name, *_ in case["decisions"] if kind == "CallActivityWithRetry"]
    assert called[-4:] == ["notify_run", "notify_run", "finish_run", "notify_run"]  # recorded, then cancelled
    completed = next(e for e in case["history"] if e["EventType"] == EXECUTION_COMPLETED)
    assert RunOutcome.model_validate(payload(completed["Result"])).status == "cancelled"
