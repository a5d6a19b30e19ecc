"""A workflow step's child run is created by an activity, which Durable may run again. On Cosmos an attempt can claim
the child's session and fail before writing its run; 60 s later the store closes that run in its place (failed,
`start_interrupted`) when another start comes to the session. The activity's retry then finds the closed run: it
must not start it (before, it wrote the child's input and started an orchestration for a closed run); the step fails
with the child's error, and its other children run and end as usual."""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

import pytest
from cosmos_faults import cosmos_writes_refused
from workflow_helpers import model_prompts, settle, start, view

from session_store import RunRecord, StoreUnavailableError
from session_store.rules import UNWRITTEN_HOLDER_AFTER

pytestmark = pytest.mark.cosmos


def _app_store() -> Any:
    return sys.modules["agent_runs.services"].RunServices.current().store  # the host's modules: the app's store


def _closed_before_its_retry(store: Any, monkeypatch: pytest.MonkeyPatch, step: str) -> list[str]:
    """The first `begin_run` of the `step`'s child claims its session and fails at its run's write; past the grace
    another start in that session closes it (the store's `unwritten_start`); then the activity's retry calls
    `begin_run` for it again. Yields the child's run id."""
    begin_run = store.begin_run
    closed: list[str] = []

    async def closed_in_its_place(record: RunRecord, *args: Any, **kwargs: Any) -> RunRecord:
        if record.metadata.get("workflow_step") == step and not closed:
            closed.append(record.run_id)
            with cosmos_writes_refused(store, "runs"), pytest.raises(StoreUnavailableError):
                await begin_run(record, *args, **kwargs)
            real_clock = store._clock
            monkeypatch.setattr(store, "_clock", lambda: real_clock() + UNWRITTEN_HOLDER_AFTER + timedelta(seconds=1))
            other = RunRecord(run_id=f"{record.run_id}.other", session_id=record.session_id, agent=record.agent)
            assert (await begin_run(other)).status == "in_progress"  # it took the session over
        return await begin_run(record, *args, **kwargs)

    monkeypatch.setattr(store, "begin_run", closed_in_its_place)
    return closed


def test_a_child_run_the_store_closed_in_place_of_its_start_is_not_started(
    cosmos_host: Any, model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = _closed_before_its_retry(_app_store(), monkeypatch, "legal")
    run_id = start(cosmos_host, "function_merge_flow", {"topic": "finance and cost"})["run_id"]
    settle(cosmos_host)

    workflow = view(cosmos_host, run_id)
    assert workflow["status"] == "failed", workflow
    [legal] = closed
    step = next(entry for entry in workflow["steps"] if entry["step"] == "opinions")
    assert step["status"] == "failed" and f"agent run '{legal}'" in step["error"], step
    assert "start_interrupted" in step["error"], step
    child = cosmos_host.client.get(f"/api/runs/{legal}")  # no run was started: the step's error says why
    assert (child.status_code, child.json()["code"]) == (404, "run_not_found"), child.text
    assert cosmos_host.get_status(legal) is None  # no orchestration was started for it
    messages = cosmos_host.client.get(f"/api/sessions/{legal}/messages")
    assert messages.status_code == 200 and messages.json()["messages"] == [], messages.text  # nor its input written
    assert model_prompts(model, "law and compliance") == []
    assert model_prompts(model, "finance and cost") == ["finance and cost?"]  # the other branch ran and ended
