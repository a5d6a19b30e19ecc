"""A branch of a fail-fast parallel step whose orchestration crashes (an unhandled error in its orchestrator: its run
never gets to report a failure) rings its workflow as a failed branch does: the step cancels the other branches at
once instead of waiting for them (for a person, possibly for a day), and fails naming the crashed branch. Its
orchestration still ends `Failed` with the same error.

The crash: a cancel event whose payload is not a cancel's (raised through the Durable webhook; the app's own routes
never send one), which the run's orchestrator fails to parse at its next episode. It needs no spying on the app's
modules, so these tests run through Azure's worker too (`DEVHOST_WORKER=runtime`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from app_services import start_app_host, stop_app_host
from test_workflow_rewind import until_finished
from workflow_helpers import decide, settle, start, view
from workflow_scripts import REPO_ROOT, app_env

from devhost.engine.api import EngineClosedError

E2E_DIR = str(Path(__file__).resolve().parents[1] / "e2e")
if E2E_DIR not in sys.path:
    sys.path.insert(0, E2E_DIR)
from e2e_settings import watches_the_app_in_process  # noqa: E402

CRASH_TEXT = "validation error for CancelEvent"


def crash(host: Any, run_id: str) -> None:
    """Run `run_id`'s orchestration crashes at its next episode (now: the event starts one)."""
    raised = host.client.post(
        f"/runtime/webhooks/durabletask/instances/{run_id}/raiseEvent/cancel", json={"reason": ["not", "a", "text"]}
    )
    assert raised.status_code == 202, raised.text


def rings(host: Any, run_id: str) -> list[str]:
    """How the attempts at ringing of run `run_id`'s orchestration ended (its `ring_workflow` activities' events)."""
    history = host.get_status(run_id, show_history=True)["historyEvents"]
    return [event["EventType"] for event in history if event.get("FunctionName") == "ring_workflow"]


def pending_approval(host: Any, run_id: str) -> str:
    pending = host.client.get(f"/api/runs/{run_id}/approvals", params={"status": "pending"}).json()
    [approval] = pending["approvals"] if isinstance(pending, dict) else pending
    return approval["approval_id"]


def both_waiting(host: Any, name: str) -> tuple[str, str, str]:
    """A `name` workflow whose branches bob and carol each wait for their email's approval: (workflow, bob, carol)."""
    run_id = start(host, name, {"topic": "the launch"})["run_id"]
    settle(host)
    bob, carol = f"{run_id}.fan.bob", f"{run_id}.fan.carol"
    assert [host.client.get(f"/api/runs/{r}").json()["status"] for r in (bob, carol)] == ["requires_action"] * 2
    return run_id, bob, carol


def assert_crashed(host: Any, run_id: str) -> None:
    status = host.get_status(run_id)
    assert status["runtimeStatus"] == "Failed" and CRASH_TEXT in str(status["output"]), status


def test_a_crashed_branch_fails_its_fail_fast_step_at_once_and_cancels_the_other(host, model) -> None:
    """Carol's orchestration crashes while bob waits for his approval: the step fails at once, naming carol
    (`run_crashed`), and cancels bob (before, it waited for bob's approval, up to a day, then failed)."""
    run_id, bob, carol = both_waiting(host, "parallel_mail_fail_fast_flow")
    crash(host, carol)
    settle(host)  # no clock moved: nothing waits for bob's approval
    failed = view(host, run_id)
    assert failed["status"] == "failed" and failed["error"]["step"] == "fan", failed
    message = failed["error"]["message"]
    assert f"'{carol}'" in message and "run_crashed" in message and bob not in message, failed
    assert host.client.get(f"/api/runs/{bob}").json()["status"] == "cancelled"
    assert not host.client.get(f"/api/runs/{bob}/approvals", params={"status": "pending"}).json()["approvals"]
    child = host.client.get(f"/api/runs/{carol}").json()
    assert child["status"] == "failed" and child["error"]["code"] == "run_crashed", child
    assert_crashed(host, carol)  # its orchestration still ended with its crash
    assert rings(host, carol) == ["TaskCompleted"]
    assert host.get_status(run_id)["runtimeStatus"] == "Completed"  # the workflow's orchestration ended it


def test_a_crashed_branch_of_a_step_that_waits_for_every_branch_rings_nothing(host, model) -> None:
    """`on_branch_failure="wait"`: carol's crash rings nothing, the step waits for bob's approval, then fails with
    carol's crash."""
    run_id, bob, carol = both_waiting(host, "parallel_mail_flow")
    crash(host, carol)
    settle(host)
    assert_crashed(host, carol)
    assert rings(host, carol) == []
    assert view(host, run_id)["status"] == "in_progress"
    assert host.client.get(f"/api/runs/{bob}").json()["status"] == "requires_action"

    decide(host, bob, pending_approval(host, bob))
    settle(host)
    failed = until_finished(host, run_id)
    assert failed["status"] == "failed" and f"'{carol}'" in failed["error"]["message"], failed
    assert host.client.get(f"/api/runs/{bob}").json()["status"] == "completed"


def test_a_crashed_run_of_its_own_rings_nothing(host, model) -> None:
    started = host.client.post("/api/agents/assistant/runs", json={"input": "Please email bob about the launch"})
    assert started.status_code in (200, 202), started.text
    run_id = started.json()["run_id"]
    settle(host)
    assert host.client.get(f"/api/runs/{run_id}").json()["status"] == "requires_action"
    crash(host, run_id)
    settle(host)
    assert_crashed(host, run_id)
    assert rings(host, run_id) == []


@watches_the_app_in_process  # the ring's activity fails in the app's worker
def test_a_ring_that_fails_leaves_the_crash_as_it_was(host, model, monkeypatch) -> None:
    """The ring's activity fails for good (its store is down): the orchestration still ends with its own crash (not
    the ring's error), and the step waits for bob, as it did before crashed branches rang."""
    rings_module = sys.modules["activities.workflow_rings"]  # the host's modules: the app's activity

    async def store_down(*args: Any) -> None:
        raise RuntimeError("the store is unreachable")

    monkeypatch.setattr(rings_module, "close_if_crashed", store_down)
    run_id, bob, carol = both_waiting(host, "parallel_mail_fail_fast_flow")
    crash(host, carol)
    settle(host)
    for _ in range(3):  # the ring's retries
        host.advance(60)
    assert_crashed(host, carol)
    assert "unreachable" not in str(host.get_status(carol)["output"])
    assert rings(host, carol) == ["TaskFailed"] * 3  # one ring, its three attempts
    assert view(host, run_id)["status"] == "in_progress"
    assert host.client.get(f"/api/runs/{bob}").json()["status"] == "requires_action"


def test_a_host_killed_after_the_ring_ran_still_fails_the_step_once_restarted(tmp_path, model) -> None:
    """The engine dies once the ring's activity has run and before its result is recorded (the ring rang, the run was
    closed): started again on the same state, the activity runs again (at least once) and the step fails as without
    the kill, carol's orchestration holding one ring."""
    env = app_env(model, SESSION_STORE_PATH=str(tmp_path / "sessions.sqlite3"))
    state = tmp_path / "devhost.sqlite3"
    host = start_app_host(REPO_ROOT, clock="virtual", env=env, state_path=state)
    try:
        run_id, bob, carol = both_waiting(host, "parallel_mail_fail_fast_flow")
        host.engine.options.faults.crash_at = {"activity_before_commit"}  # the next activity: the ring
        crash(host, carol)
        with pytest.raises(EngineClosedError):
            settle(host)
        assert host.engine.crashed
    finally:
        stop_app_host(host)
    host = start_app_host(REPO_ROOT, clock="virtual", env=env, state_path=state)
    try:
        # The ring's activity, in flight at the kill, runs again as the engine starts: before the host has set the
        # Durable client's binding (a devhost limit), that attempt fails, and its retry (2 s on) goes through. Through
        # Azure's worker that attempt may end after the clock moved: the clock moves on until carol has ended.
        for _ in range(10):
            host.advance(5)
            if host.get_status(carol)["runtimeStatus"] != "Running":
                break
        failed = until_finished(host, run_id)
        assert failed["status"] == "failed" and f"'{carol}'" in failed["error"]["message"], failed
        assert "run_crashed" in failed["error"]["message"], failed
        assert host.client.get(f"/api/runs/{bob}").json()["status"] == "cancelled"
        assert_crashed(host, carol)
        ring = rings(host, carol)  # one ring: its attempts, the last one completed
        assert ring[-1] == "TaskCompleted" and "TaskCompleted" not in ring[:-1], ring
    finally:
        stop_app_host(host)
