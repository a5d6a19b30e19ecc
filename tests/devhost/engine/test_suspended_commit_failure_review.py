"""A suspended instance holds its messages in the inbox; an episode whose commit fails inside devhost keeps exactly
one copy of them (DTFx abandons the work item: its messages are redelivered once, never duplicated).

Real parts: the real SDK through devhost's engine, a virtual clock; the failure is a SQLite COMMIT that raises.
"""

from __future__ import annotations

import json
import sqlite3

from engine_helpers import OpenEngine, output

from devhost.engine.api import RuntimeStatus


async def test_a_failed_commit_of_a_suspended_instance_keeps_one_copy_of_its_held_messages(
    open_engine: OpenEngine,
) -> None:
    engine = await open_engine("human_interaction")
    iid = await engine.start_new("collect_events", "s1", None)
    await engine.run_until_idle()
    await engine.suspend(iid, "hold")
    await engine.run_until_idle()
    status = await engine.get_status(iid)
    assert status is not None and status.runtime_status == RuntimeStatus.Suspended

    store = engine._rt.store
    commit = store.commit
    failures = []

    def fails_once() -> None:
        if not failures:
            failures.append(1)
            store.rollback()
            raise sqlite3.OperationalError("disk I/O error")
        commit()

    await engine.raise_event(iid, "Item", json.dumps("a"))  # held while suspended
    store.commit = fails_once  # type: ignore[method-assign]  # (the episode's commit fails)
    await engine.run_until_idle()
    assert failures
    assert engine._rt.inbox.count(iid) == 1

    await engine.resume(iid, "go")
    for item in ("b", "c"):
        await engine.raise_event(iid, "Item", json.dumps(item))
    await engine.run_until_idle()
    status = await engine.get_status(iid)
    assert status is not None and status.runtime_status == RuntimeStatus.Completed
    assert output(status) == ["a", "b", "c"]
