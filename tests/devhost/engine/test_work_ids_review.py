"""Stored activity work items survive a restart even when an earlier execution of the same instance id finishes an
activity late.

Real parts: the real SDK through devhost's engine, a SQLite state file, a close and reopen of the engine (what a
host restart does to it).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

from engine_helpers import OpenEngine, output

from devhost.engine.api import DurableEngine, RuntimeStatus


async def until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Bounded wait on a condition outside the engine (a file an activity writes), checked between loop turns."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        await asyncio.sleep(0.01)


def activity_tasks(engine: DurableEngine) -> int:
    return sum(1 for t in engine._rt._tasks if t.get_name().startswith("activity "))


def gate_input(tmp_path: Path, name: str) -> str:
    payload = {"name": name, "started": str(tmp_path / f"started-{name}"), "gate": str(tmp_path / f"gate-{name}")}
    return json.dumps(json.dumps(payload))  # as the Python client sends it


async def test_a_late_activity_of_a_replaced_execution_does_not_delete_the_new_executions_work(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    state = str(tmp_path / "state.sqlite3")
    engine = await open_engine("at_least_once", state_path=state)
    await engine.start_new("gated_once", "run-1", gate_input(tmp_path, "old"))
    await until((tmp_path / "started-old").exists, "the first execution's activity")
    await engine.terminate("run-1", "replaced")  # its activity runs on, as on Azure
    await engine.wait_for_status("run-1", {RuntimeStatus.Terminated}, timeout=30)
    await engine.start_new("gated_once", "run-1", gate_input(tmp_path, "new"))  # same id, a new execution
    await until((tmp_path / "started-new").exists, "the second execution's activity")

    (tmp_path / "gate-old").touch()  # the terminated execution's activity ends now; its result is dropped
    await until(lambda: activity_tasks(engine) == 1, "the first activity's result to commit")
    db = sqlite3.connect(state)
    try:
        stored = db.execute("SELECT count(*) FROM work WHERE instance_id='run-1'").fetchone()[0]
    finally:
        db.close()
    assert stored == 1  # the second execution's activity, still in flight

    await engine.close()  # a restart: the in-flight activity must run again from its stored work item
    (tmp_path / "gate-new").touch()
    reopened = await open_engine("at_least_once", state_path=state)
    await reopened.run_until_idle()
    status = await reopened.get_status("run-1")
    assert status is not None and status.runtime_status == RuntimeStatus.Completed
    assert output(status) == "new"
