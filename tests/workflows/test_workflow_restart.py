"""Kill devhost (SIGKILL) mid-workflow and start it again on the same state files: the workflow completes with the
same output as an uninterrupted run. The app runs in a child process (`SubprocessHost`, virtual clock), its store
is a SQLite file, and its model is the scripted server in this process."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from workflow_helpers import PROGRESS_TIMEOUT_S, decide, start, view
from workflow_scripts import REPO_ROOT, standard_script

from devhost.testing import SubprocessHost
from scripted_model.script import Reply
from scripted_model.server import ScriptedModelServer

pytestmark = pytest.mark.slow


@pytest.fixture
def slow_writer_model() -> Iterator[ScriptedModelServer]:
    """The writer takes half a second per answer, so a kill can land while a child run's model call is in flight."""
    script = standard_script()
    for rule in script.rules:
        if rule.match.system == "You are a writer":
            rule.reply = Reply(text=rule.reply.text, latency_ms=500)
    server = ScriptedModelServer(script)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def app(tmp_path: Path, slow_writer_model: ScriptedModelServer) -> Iterator[SubprocessHost]:
    env = {  # the shipped agents and workflows, whatever the environment the suite left behind
        "AGENTS_PACKAGE": "served_agents",
        "WORKFLOWS_PACKAGE": "served_workflows",
        "SCRIPTED_MODEL_URL": str(slow_writer_model.base_url),
        "SESSION_STORE_PATH": str(tmp_path / "store.sqlite3"),
        "CONTINUATION_TOKEN_SECRET": "workflow-restart-secret",
    }
    host = SubprocessHost(REPO_ROOT, state_path=tmp_path / "devhost.sqlite3", env=env, clock="virtual",
                          log_path=tmp_path / "devhost.log")
    host.start()
    try:
        yield host
    finally:
        host.close()


def _poll(app: SubprocessHost, run_id: str, ready: Any, timeout: float = PROGRESS_TIMEOUT_S,
          wait_seconds: float = 1) -> dict[str, Any]:
    """Poll the workflow (long-poll, bounded) until `ready(view)` holds. `wait_seconds=0` for a state in the middle
    of a step: a long poll answers only once a step is done, by which time the next one may be over too."""
    deadline = time.monotonic() + timeout
    token: str | None = None
    while time.monotonic() < deadline:
        # With the token, the long poll answers when something new happens (or after a second), not at once.
        current = view(app, run_id, wait_seconds=wait_seconds, **({"continuation_token": token} if token else {}))
        if ready(current):
            return current
        token = current["continuation_token"] or token
    raise AssertionError(f"workflow {run_id} did not get there in {timeout}s: {current}")


def _sign_off(app: SubprocessHost, run_id: str) -> dict[str, Any]:
    waiting = _poll(app, run_id, lambda v: v["status"] == "requires_action")
    [gate] = waiting["pending_approvals"]
    decide(app, run_id, gate["approval_id"])
    return _poll(app, run_id, lambda v: v["status"] == "completed")


def test_review_pipeline_survives_sigkill_mid_step_and_at_the_gate(app: SubprocessHost) -> None:
    reference = _sign_off(app, start(app, "review_pipeline", {"topic": "crash safety"})["run_id"])["output"]

    run_id = start(app, "review_pipeline", {"topic": "crash safety"})["run_id"]
    _poll(app, run_id, lambda v: v["active_step"] is not None and v["active_step"]["child_runs"], wait_seconds=0)
    app.kill()  # while the writer's child run works (its model call takes 500 ms)
    app.start()
    _poll(app, run_id, lambda v: v["status"] == "requires_action")
    app.kill()  # while the workflow waits for its sign-off
    app.start()

    done = _sign_off(app, run_id)
    assert done["output"] == reference
    assert [entry["step"] for entry in view(app, run_id)["steps"]] == [
        "write", "review", "needs_revision", "revise", "final", "sign_off"
    ]


def test_follow_up_delay_survives_a_restart(app: SubprocessHost) -> None:
    run_id = start(app, "follow_up", {"ticket": "T-42"})["run_id"]
    _poll(app, run_id, lambda v: v["status"] == "waiting")
    app.kill()
    app.start()
    app.advance(2 * 86400)  # the two-day delay fires on the restarted host
    app.wait_until_idle(timeout=PROGRESS_TIMEOUT_S)
    assert view(app, run_id)["active_step"]["id"] == "watch"
    app.wait_until_idle(timeout=PROGRESS_TIMEOUT_S, skip_timers=True)
    done = view(app, run_id)
    assert done["status"] == "completed" and done["output"]["checks"] == 15
