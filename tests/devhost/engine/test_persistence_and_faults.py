"""SQLite persistence, restart-resume (at-least-once for in-flight activities) and fault injection."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from engine_helpers import START, OpenEngine, output, raw_history

from devhost.engine.api import EngineClosedError, EngineOptions, FaultPlan, RuntimeStatus, VirtualClock

CRASH_POINTS = [f"{step}_{when}_commit" for step in ("episode", "activity") for when in ("before", "after")]


def _payload(log: Path, steps: int = 3) -> str:
    return json.dumps(json.dumps({"path": str(log), "steps": steps}))


def _deliveries(log: Path) -> list[int]:
    return [int(line) for line in log.read_text().split()] if log.exists() else []


@pytest.mark.parametrize("point", CRASH_POINTS)
async def test_crash_between_commit_steps_then_reopen_finishes_the_run(
    open_engine: OpenEngine, tmp_path: Path, point: str
) -> None:
    state, log = str(tmp_path / "state.sqlite3"), tmp_path / "deliveries.txt"
    faults = FaultPlan(crash_at={point}, crash_after=2)
    crashing = await open_engine("at_least_once", state_path=state, options=EngineOptions(faults=faults))
    iid = await crashing.start_new("record_chain", "run-1", _payload(log))
    with pytest.raises(EngineClosedError):
        await crashing.run_until_idle()
    assert crashing.crashed
    reopened = await open_engine("at_least_once", state_path=state)
    await reopened.run_until_idle()
    status = await reopened.get_status(iid)
    assert status is not None and status.runtime_status == RuntimeStatus.Completed
    assert output(status) == [0, 10, 20]
    deliveries = _deliveries(log)
    assert sorted(set(deliveries)) == [0, 1, 2]  # nothing lost
    if point == "activity_before_commit":
        assert len(deliveries) == 4  # the in-flight activity ran again: at-least-once
    else:
        assert len(deliveries) == 3  # nothing committed ran twice


async def test_close_and_reopen_resumes_pending_timer(open_engine: OpenEngine, tmp_path: Path) -> None:
    state = str(tmp_path / "state.sqlite3")
    first = await open_engine("human_interaction", state_path=state)
    iid = await first.start_new("approval", None, json.dumps(json.dumps({"timeout_s": 3600})))
    await first.run_until_idle()
    await first.close()
    later = VirtualClock(START + timedelta(hours=2))
    second = await open_engine("human_interaction", state_path=state, clock=later)
    await second.run_until_idle()
    status = await second.get_status(iid)
    assert status is not None and output(status) == {"approved": None, "timed_out": True}


async def test_reopen_keeps_completed_instances_and_their_history(open_engine: OpenEngine, tmp_path: Path) -> None:
    state = str(tmp_path / "state.sqlite3")
    first = await open_engine("chaining", state_path=state)
    iid = await first.start_new("chaining", None, None)
    await first.run_until_idle()
    await first.close()
    second = await open_engine("chaining", state_path=state)
    status = await second.get_status(iid, show_history=True)
    assert status is not None and status.runtime_status == RuntimeStatus.Completed
    assert status.history_events is not None and len(status.history_events) == 5


@pytest.mark.parametrize(
    "faults",
    [
        FaultPlan(duplicate_activity_results=True),
        FaultPlan(reorder_completions=True, seed=7),
        FaultPlan(batch_completions=5, reorder_completions=True, seed=3),
        FaultPlan(duplicate_activity_results=True, batch_completions=3, reorder_completions=True, seed=11),
    ],
    ids=["duplicates", "reorder", "batch+reorder", "all"],
)
async def test_fan_out_and_chain_give_same_results_under_delivery_faults(
    open_engine: OpenEngine, tmp_path: Path, faults: FaultPlan
) -> None:
    engine = await open_engine("at_least_once", options=EngineOptions(faults=faults))
    fan = await engine.start_new("record_fan_out", None, _payload(tmp_path / "fan.txt", 12))
    chain = await engine.start_new("record_chain", None, _payload(tmp_path / "chain.txt", 4))
    await engine.run_until_idle()
    fan_status, chain_status = await engine.get_status(fan), await engine.get_status(chain)
    assert fan_status is not None and output(fan_status) == [s * 10 for s in range(12)]
    assert chain_status is not None and output(chain_status) == [0, 10, 20, 30]


async def test_batched_completions_arrive_in_one_episode(open_engine: OpenEngine, tmp_path: Path) -> None:
    engine = await open_engine("at_least_once", options=EngineOptions(faults=FaultPlan(batch_completions=6)))
    iid = await engine.start_new("record_fan_out", None, _payload(tmp_path / "fan.txt", 6))
    await engine.run_until_idle()
    history = raw_history(engine, iid)  # white-box: episode boundaries in the raw history
    starts = [i for i, e in enumerate(history) if e["EventType"] == 12]
    assert len(starts) == 2  # first episode schedules 6 tasks, the second gets all 6 completions at once
    assert sum(e["EventType"] == 5 for e in history[starts[1]:]) == 6


async def test_real_clock_timer_fires_without_virtual_time(open_engine: OpenEngine) -> None:
    from devhost.engine.api import RealClock

    engine = await open_engine("human_interaction", clock=RealClock())
    iid = await engine.start_new("approval", None, json.dumps(json.dumps({"timeout_s": 0.3})))
    status = await engine.wait_for_status(iid, timeout=10)
    assert output(status) == {"approved": None, "timed_out": True}


@pytest.mark.parametrize("point", ["entity_before_commit", "entity_after_commit"])
async def test_entity_batch_crash_then_reopen_commits_exactly_once(
    open_engine: OpenEngine, tmp_path: Path, point: str
) -> None:
    state = str(tmp_path / "state.sqlite3")
    crashing = await open_engine("entity_counter", state_path=state,
                                 options=EngineOptions(faults=FaultPlan(crash_at={point})))
    await crashing.signal_entity("Counter", "c", "add", json.dumps(json.dumps(2)))
    with pytest.raises(EngineClosedError):
        await crashing.run_until_idle()
    reopened = await open_engine("entity_counter", state_path=state)
    await reopened.run_until_idle()
    entity = await reopened.read_entity("Counter", "c")
    assert entity is not None and entity.state_json == "2"
