"""Replay compatibility of the `workflow` orchestrator: orchestrations in flight must carry on across a deploy.

`golden/workflow_episodes.jsonl.gz` holds the last episode of orchestrations that this test suite ran with the
orchestrator as it was before its driver spoke typed requests (commit 0ffaea5): the whole history as the host
hands it to the orchestrator, and what that code answered (its durable actions - activities with their inputs,
timers, event waits, child runs -, its custom status, its output). Today's orchestrator, through the real Durable
SDK, must answer the same: a different action is a non-determinism failure for every orchestration in flight.
If a change breaks one of these on purpose, it breaks running workflows: give the orchestrator a new name (a
version) instead of re-recording.

Cases: the review pipeline with its sign-off escalated (child runs, a branch, a function, a gate), a delay then a
monitor (`follow_up`), a queue of signals, signals that time out or are cancelled, a failing step, an eternal
monitor continuing as new, cancels while child runs work.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import sys
from pathlib import Path
from typing import Any

import azure.durable_functions as df
import pytest
from workflow_scripts import FIXTURES_DIR

from devhost.app_loader import FunctionInfo
from devhost.invoke import invoke_orchestrator
from orchestrators.workflow import workflow

GOLDEN = Path(__file__).parent / "golden" / "workflow_episodes.jsonl.gz"


def _episodes() -> list[dict[str, Any]]:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def _compact(value: Any) -> Any:
    """The output as recorded: JSON, without empty fields."""
    if isinstance(value, dict):
        return {k: _compact(v) for k, v in value.items() if not (v is None or v is False or v == [])}
    if isinstance(value, list):
        return [_compact(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """devhost's parsed output as JSON values: actions (named tuples) and retry options as objects of their fields."""
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {name: _plain(item) for name, item in value._asdict().items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _actions(output: dict[str, Any]) -> list[str]:
    """The durable actions, one line each in order (a compound's children after it): a readable diff."""
    lines: list[str] = []

    def walk(action: dict[str, Any], depth: int) -> None:
        fields = {k: v for k, v in action.items() if k != "children"}
        lines.append("  " * depth + json.dumps(fields, sort_keys=True))
        for child in action.get("children", []):
            walk(child, depth + 1)

    for group in output.get("action_groups", []):
        for action in group:
            walk(action, 0)
    return lines


@pytest.mark.parametrize("episode", _episodes(), ids=lambda episode: episode["workflow"])
def test_a_recorded_history_replays_to_the_same_decisions(episode: dict[str, Any]) -> None:
    if str(FIXTURES_DIR) not in sys.path:
        sys.path.insert(0, str(FIXTURES_DIR))  # the test workflows (`wf_fixtures`) the histories ran
    function = FunctionInfo(
        name="workflow", kind="orchestration", trigger_type="orchestrationTrigger", trigger_param="context",
        bindings=[], fn=df.Orchestrator.create(workflow), script_file="function_app.py",
    )
    output = invoke_orchestrator(function, episode["trigger"])
    # What the output says (its compared fields; not the JSON devhost keeps to parse the next episode faster)
    said = {f.name: getattr(output, f.name) for f in dataclasses.fields(output) if f.compare}
    answered = _compact(json.loads(json.dumps(_plain(said))))
    assert _actions(answered) == _actions(episode["output"])
    # The custom status and the output too; a failed workflow's output now also says where a rewind goes on from
    # (an output is never replayed, so histories in flight are not affected).
    resume = _pop_resume(answered)
    assert answered == episode["output"]
    assert (resume is not None) == ('"status":"failed"' in str(episode["output"].get("output_json")))


def _pop_resume(output: dict[str, Any]) -> Any:
    if "output_json" not in output:
        return None
    result = json.loads(output["output_json"])
    resume = result.pop("resume", None) if isinstance(result, dict) else None
    output["output_json"] = json.dumps(result, separators=(",", ":"))
    return resume
