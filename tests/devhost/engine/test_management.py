"""Management operations: start errors, terminate, suspend/resume, rewind, restart, purge, queries."""

from __future__ import annotations

import json

import pytest
from engine_helpers import OpenEngine, output, run

from devhost.engine.api import (
    InstanceExistsError,
    InstanceGoneError,
    InstanceNotFoundError,
    InstanceQuery,
    InvalidInstanceIdError,
    InvalidOperationError,
    RuntimeStatus,
)


async def _waiting_approval(open_engine: OpenEngine, instance_id: str = "a1"):
    engine = await open_engine("human_interaction")
    await engine.start_new("approval", instance_id, json.dumps(json.dumps({"timeout_s": 600})))
    await engine.run_until_idle()
    return engine


@pytest.mark.parametrize("bad", ["@x", "a/b", "a?b", "a#b", "a\\b", "a\x01", "a\x00", "a\x1f", "a\x7f", "a\x9f",
                                 "x" * 257])
async def test_start_new_rejects_invalid_ids(open_engine: OpenEngine, bad: str) -> None:
    engine = await open_engine("chaining")
    with pytest.raises(InvalidInstanceIdError):
        await engine.start_new("chaining", bad, None)


@pytest.mark.parametrize("good", ["a b", "a\xa0b", "é-ü", "a@b", "x" * 256])
async def test_start_new_takes_other_ids(open_engine: OpenEngine, good: str) -> None:
    engine = await open_engine("chaining")
    assert await engine.start_new("chaining", good, None) == good


async def test_duplicate_id_on_running_instance_is_refused_terminal_one_is_replaced(open_engine: OpenEngine) -> None:
    engine = await _waiting_approval(open_engine)
    with pytest.raises(InstanceExistsError):
        await engine.start_new("approval", "a1", None)
    await engine.terminate("a1", "stop")
    await engine.run_until_idle()
    await engine.start_new("approval", "a1", json.dumps(json.dumps({"timeout_s": 1})))
    await engine.run_until_idle(skip_timers=True)
    status = await engine.get_status("a1")
    assert status is not None and status.runtime_status == RuntimeStatus.Completed


async def test_terminate_output_is_reason_and_events_then_gone(open_engine: OpenEngine) -> None:
    engine = await _waiting_approval(open_engine)
    await engine.terminate("a1", "no longer needed")
    status = await engine.wait_for_status("a1", timeout=5)
    assert status.runtime_status == RuntimeStatus.Terminated and output(status) == "no longer needed"
    with pytest.raises(InstanceGoneError):
        await engine.raise_event("a1", "Approval", "true")
    with pytest.raises(InstanceGoneError):
        await engine.terminate("a1", "again")
    with pytest.raises(InstanceNotFoundError):
        await engine.raise_event("missing", "Approval", "true")


async def test_events_while_suspended_are_held_until_resume(open_engine: OpenEngine) -> None:
    engine = await _waiting_approval(open_engine)
    await engine.suspend("a1", "pause")
    await engine.run_until_idle()
    await engine.raise_event("a1", "Approval", '"late"')
    await engine.run_until_idle()
    suspended = await engine.get_status("a1")
    assert suspended is not None and suspended.runtime_status == RuntimeStatus.Suspended
    await engine.resume("a1", "go")
    status = await engine.wait_for_status("a1", timeout=5)
    assert output(status) == {"approved": "late"}
    history = await engine.get_status("a1", show_history=True)
    assert history is not None and history.history_events is not None
    kinds = [e["EventType"] for e in history.history_events]
    assert kinds.index("ExecutionSuspended") < kinds.index("ExecutionResumed") < kinds.index("EventRaised")


async def test_rewind_reruns_failed_activity(open_engine: OpenEngine, tmp_path) -> None:
    engine = await open_engine("fan_out_fan_in")
    failed = await run(engine, "fan_out_uncaught")
    assert failed.runtime_status == RuntimeStatus.Failed
    with pytest.raises(InvalidOperationError):
        await engine.rewind((await run(engine, "fan_out_fan_in", {"count": 1})).instance_id, "not failed")
    await engine.rewind(failed.instance_id, "retry")
    await engine.run_until_idle()
    again = await engine.get_status(failed.instance_id)
    assert again is not None and again.runtime_status == RuntimeStatus.Failed  # 'boom' fails again, deterministically
    assert "boom y" in str(output(again))


async def test_restart_uses_original_input(open_engine: OpenEngine) -> None:
    engine = await open_engine("fan_out_fan_in")
    first = await run(engine, "fan_out_fan_in", {"count": 3})
    new_id = await engine.restart(first.instance_id, new_instance_id=True)
    assert new_id != first.instance_id
    same_id = await engine.restart(first.instance_id, new_instance_id=False)
    assert same_id == first.instance_id
    await engine.run_until_idle()
    for iid in (new_id, same_id):
        status = await engine.get_status(iid)
        assert status is not None and output(status) == {"results": [0, 1, 4], "sum": 5}
    with pytest.raises(InstanceNotFoundError):
        await engine.restart("missing")


async def test_purge_only_terminal_and_purge_by_filters(open_engine: OpenEngine) -> None:
    engine = await _waiting_approval(open_engine)
    assert await engine.purge("a1") == 0
    await engine.terminate("a1", None)
    await engine.run_until_idle()
    assert await engine.purge("a1") == 1 and await engine.get_status("a1") is None
    assert await engine.purge("a1") == 0
    for i in range(3):
        await run(engine, "approval", {"timeout_s": 1}, instance_id=f"p{i}")
    assert await engine.purge_by(InstanceQuery(instance_id_prefix="p", runtime_status=[RuntimeStatus.Completed])) == 3


async def test_query_filters_and_paging(open_engine: OpenEngine) -> None:
    engine = await open_engine("chaining")
    for i in range(5):
        await engine.start_new("chaining", f"q{i}", None)
    await engine.start_new("chaining", "other", None)
    await engine.run_until_idle()
    page, token = await engine.query_instances(InstanceQuery(instance_id_prefix="q", top=2))
    assert [s.instance_id for s in page] == ["q0", "q1"] and token is not None
    rest, token2 = await engine.query_instances(InstanceQuery(instance_id_prefix="q", top=10, continuation_token=token))
    assert [s.instance_id for s in rest] == ["q2", "q3", "q4"] and token2 is None
    running, _ = await engine.query_instances(InstanceQuery(runtime_status=[RuntimeStatus.Running]))
    assert running == []
    hidden, _ = await engine.query_instances(InstanceQuery(instance_id_prefix="other", show_input=False))
    assert hidden[0].to_json()["input"] is None


async def test_wait_for_status_times_out_without_leaking_waiters(open_engine: OpenEngine) -> None:
    engine = await _waiting_approval(open_engine)
    with pytest.raises(TimeoutError):
        await engine.wait_for_status("a1", {RuntimeStatus.Completed}, timeout=0.01)
    assert "a1" not in engine._rt._status_waiters  # white-box: the timed-out waiter is gone
    running = await engine.wait_for_status("a1", {RuntimeStatus.Running}, timeout=1)
    assert running.runtime_status == RuntimeStatus.Running  # already in the wanted status: returns at once
