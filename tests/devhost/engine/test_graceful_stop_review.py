"""A graceful stop lets the user code in flight finish and commits its result (DurableEngine.close's contract, and
what the Functions host and DTFx do when they drain): after the restart nothing runs twice.

Real parts: the real SDK through devhost's engine, a SQLite state file, a close and reopen of the engine.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from engine_helpers import OpenEngine, output
from test_work_ids_review import until

from devhost.engine.api import RuntimeStatus


async def test_an_activity_that_finishes_during_a_graceful_stop_is_committed_not_run_again(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    state = str(tmp_path / "state.sqlite3")
    started, gate = tmp_path / "started", tmp_path / "gate"
    payload = json.dumps(json.dumps({"name": "once", "started": str(started), "gate": str(gate)}))
    engine = await open_engine("at_least_once", state_path=state)
    await engine.start_new("gated_once", "run-1", payload)
    await until(started.exists, "the activity to start")

    closing = asyncio.ensure_future(engine.close())
    await asyncio.sleep(0)  # the stop has begun: it waits for the user code in flight
    assert not closing.done()
    gate.touch()  # the activity returns within the grace period
    await closing

    reopened = await open_engine("at_least_once", state_path=state)
    await reopened.run_until_idle()
    status = await reopened.get_status("run-1")
    assert status is not None and status.runtime_status == RuntimeStatus.Completed
    assert output(status) == "once"
    assert started.read_text().count("started") == 1  # not delivered again after the restart
