"""Entities on the legacy out-of-proc protocol: batches, SDK quirks, orchestrator calls/signals, client reads."""

from __future__ import annotations

import json

import pytest
from engine_helpers import OpenEngine, output, raw_history, run

from devhost.engine.api import EntityQuery, InvalidEntityKeyError, RuntimeStatus, UnknownFunctionError


def _client_input(value: object) -> str:
    """What the extension stores for a Python client signal: a JSON string literal of json.dumps(value)."""
    return json.dumps(json.dumps(value))


async def test_counter_round_trip_matches_the_documented_batches(open_engine: OpenEngine) -> None:
    engine = await open_engine("entity_counter")
    for op, value in [("add", 5), ("add", 3)]:
        await engine.signal_entity("Counter", "k1", op, _client_input(value))
    await engine.run_until_idle()
    state = await engine.read_entity("counter", "k1")
    assert state is not None and state.state_json == "8" and state.name == "counter"
    for op, value in [("add_then_fail", 100), ("fail", None), ("reset", None)]:
        await engine.signal_entity("Counter", "k1", op, None if value is None else _client_input(value))
    await engine.run_until_idle()
    state = await engine.read_entity("Counter", "k1")
    assert state is not None and state.state_json == "0"  # no rollback on exception (108 then reset)


async def test_deleted_entity_reads_404_but_stays_stored(open_engine: OpenEngine) -> None:
    engine = await open_engine("entity_counter")
    await engine.signal_entity("Counter", "gone", "add", _client_input(1))
    await engine.signal_entity("Counter", "gone", "delete", None)
    await engine.run_until_idle()
    assert await engine.read_entity("Counter", "gone") is None
    stored = engine._rt.entities["@counter@gone"]  # white-box: the trigger will say exists false, state "null"
    assert (stored.exists, stored.state) == (False, "null")


async def test_orchestration_signal_then_call_in_order_and_exception(open_engine: OpenEngine) -> None:
    engine = await open_engine("entity_counter")
    status = await run(engine, "counter_orch", "o1")
    assert status.runtime_status == RuntimeStatus.Completed
    assert output(status) == {"value": 5, "error": "plain failure"}
    history = raw_history(engine, status.instance_id)
    sent = [e for e in history if e["EventType"] == 14]
    assert [json.loads(e["Input"])["op"] for e in sent] == ["add", "get", "fail"]
    assert all(e["InstanceId"] == "@counter@o1" and e["Name"] == "op" for e in sent)
    assert json.loads(sent[0]["Input"]).get("signal") is True and "signal" not in json.loads(sent[1]["Input"])


async def test_entity_guid_ids_are_deterministic_across_replays(open_engine: OpenEngine) -> None:
    first = await open_engine("entity_counter")
    second = await open_engine("entity_counter")
    a = await run(first, "counter_orch", "k", instance_id="same")
    b = await run(second, "counter_orch", "k", instance_id="same")
    ids = [[json.loads(e["Input"])["id"] for e in (raw_history(eng, s.instance_id))
            if e["EventType"] == 14] for eng, s in ((first, a), (second, b))]
    assert ids[0] == ids[1] and len(set(ids[0])) == 3


async def test_signal_errors_and_listing(open_engine: OpenEngine) -> None:
    engine = await open_engine("entity_counter")
    with pytest.raises(UnknownFunctionError):
        await engine.signal_entity("nope", "k", "add", None)
    with pytest.raises(InvalidEntityKeyError):
        await engine.signal_entity("Counter", "a/b", "add", None)
    for key in ("b", "a", "c"):
        await engine.signal_entity("Counter", key, "add", _client_input(1))
    await engine.run_until_idle()
    page, token = await engine.query_entities(EntityQuery(name="counter", top=2, fetch_state=True))
    assert [s.key for s in page] == ["a", "b"] and token is not None
    assert page[0].to_list_item(fetch_state=True)["state"] == 1


async def test_batches_are_serialised_per_entity_and_split_at_batch_size(open_engine: OpenEngine) -> None:
    from devhost.engine.api import EngineOptions

    engine = await open_engine("entity_counter", options=EngineOptions(entity_batch_size=3))
    for _ in range(10):
        await engine.signal_entity("Counter", "k", "add", _client_input(1))
    await engine.run_until_idle()
    state = await engine.read_entity("Counter", "k")
    assert state is not None and state.state_json == "10"


def _app_module():
    import sys

    return sys.modules["function_app"]


async def test_internal_error_aborts_the_batch_and_redelivers_it(open_engine: OpenEngine) -> None:
    engine = await open_engine("entity_counter")
    _app_module().flaky_calls["n"] = 0
    await engine.signal_entity("Counter", "f", "add", _client_input(1))
    await engine.signal_entity("Counter", "f", "flaky_once", None)
    await engine.run_until_idle()
    assert await engine.read_entity("Counter", "f") is None  # nothing of the failed batch was committed
    await engine.run_until_idle(skip_timers=True)  # the retry back-off elapses (virtual time)
    state = await engine.read_entity("Counter", "f")
    assert state is not None and state.state_json == "1"  # the 'add' ran again but was committed exactly once
    assert _app_module().flaky_calls["n"] == 2


async def test_yielded_signal_is_sent_twice_and_hangs(open_engine: OpenEngine) -> None:
    engine = await open_engine("entity_counter")
    status = await run(engine, "yielded_signal")
    assert status.runtime_status == RuntimeStatus.Running
    state = await engine.read_entity("Counter", "ys")
    assert state is not None and state.state_json == "2"


async def test_late_entity_response_after_completion_is_dropped(open_engine: OpenEngine) -> None:
    engine = await open_engine("entity_counter")
    module = _app_module()
    module.slow_release.clear()
    try:
        iid = await engine.start_new("call_or_timeout", None, None)
        await engine.wait_for_status(iid, {RuntimeStatus.Running}, timeout=5)  # first episode ran: timer created
        engine.clock.advance(60)  # type: ignore[attr-defined]  # the timer wins while the entity call blocks
        status = await engine.wait_for_status(iid, timeout=5)
        assert output(status) == "timed out"  # a pending entity call is not an open task: completion allowed
    finally:
        module.slow_release.set()
    await engine.run_until_idle()
    after = await engine.get_status(iid)
    assert after is not None and after.runtime_status == RuntimeStatus.Completed and output(after) == "timed out"
    state = await engine.read_entity("Counter", "slow")
    assert state is not None  # the entity batch itself committed (set_result created it)


async def test_blocked_batch_does_not_block_reads_or_other_entities(open_engine: OpenEngine) -> None:
    """AgentFunctionApp's pattern: a sync entity op blocks a worker thread (an LLM call) while HTTP handlers poll the
    committed state and other entities keep running."""
    import asyncio

    engine = await open_engine("entity_counter")
    module = _app_module()
    await engine.signal_entity("Counter", "slow", "add", _client_input(7))
    await engine.run_until_idle()
    module.slow_release.clear()
    try:
        await engine.signal_entity("Counter", "slow", "slow", None)
        await engine.signal_entity("Counter", "slow", "add", _client_input(1))  # queued behind the blocked batch
        await engine.signal_entity("Counter", "other", "add", _client_input(3))
        deadline = asyncio.get_running_loop().time() + 5
        while (await engine.read_entity("Counter", "other")) is None:  # bounded wait, no sleeps: yield to the loop
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0)
        state = await engine.read_entity("Counter", "slow")
        assert state is not None and state.state_json == "7"  # committed state only, never mid-batch
    finally:
        module.slow_release.set()
    await engine.run_until_idle()
    state = await engine.read_entity("Counter", "slow")
    assert state is not None and state.state_json == "8"


async def test_entity_to_entity_signals_are_forwarded() -> None:
    """SDK 1.x cannot emit `signals`, but the host protocol accepts them (E.6.7): a raw entity function returns one."""
    from datetime import UTC, datetime

    from devhost.app_loader import FunctionIndex, FunctionInfo
    from devhost.engine.api import DurableEngine, VirtualClock

    def forwarder(context) -> str:  # a raw entity function: gets func.EntityContext, returns the result JSON
        batch = json.loads(context.body)
        signals = [{"target": {"name": "sink", "key": "k"}, "name": "got", "input": op["input"]}
                   for op in batch["batch"]]
        return json.dumps({"entityExists": True, "entityState": "1", "results": [
            {"isError": False, "duration": 0, "startTime": 0, "result": "null"} for _ in batch["batch"]],
            "signals": signals})

    seen: list[dict] = []

    def sink(context) -> str:
        batch = json.loads(context.body)
        seen.extend(batch["batch"])
        return json.dumps({"entityExists": True, "entityState": str(len(seen)), "results": [
            {"isError": False, "duration": 0, "startTime": 0, "result": "null"} for _ in batch["batch"]],
            "signals": []})

    functions = [FunctionInfo(name=n, kind="entity", trigger_type="entityTrigger", trigger_param="context",
                              bindings=[], fn=f, script_file="inline", entity_name=n)
                 for n, f in (("forwarder", forwarder), ("sink", sink))]
    engine = await DurableEngine.open(FunctionIndex(app_dir="inline", functions=functions),
                                      clock=VirtualClock(datetime(2030, 1, 1, tzinfo=UTC)))
    try:
        await engine.signal_entity("forwarder", "a", "go", '"x"')
        await engine.run_until_idle()
        assert seen == [{"name": "got", "input": '"x"', "isSignal": True}]
        state = await engine.read_entity("sink", "k")
        assert state is not None and state.state_json == "1"
    finally:
        await engine.close()


async def test_function_timeout_fails_every_operation_and_keeps_state(open_engine: OpenEngine) -> None:
    from devhost.engine.api import EngineOptions

    engine = await open_engine("entity_counter", options=EngineOptions(function_timeout_seconds=0.2))
    module = _app_module()
    module.slow_release.clear()
    try:
        iid = await engine.start_new("slow_call", None, None)
        status = await engine.wait_for_status(iid, timeout=10)
    finally:
        module.slow_release.set()
    assert status.runtime_status == RuntimeStatus.Failed
    assert output(status) == ("Orchestrator function 'slow_call' failed: Timeout value of 00:00:00.2000000 "
                              "was exceeded by function: Functions.Counter")
    assert await engine.read_entity("Counter", "slow") is None  # state unchanged: the entity was never created
