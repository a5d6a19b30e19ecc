"""`agent_runs.wire.compact_json`: what it leaves out, what it never leaves out, and the defaults it relies on.

A field left out of a durable payload reads back as its default; histories in flight hold payloads written with
today's defaults, so those defaults are part of the durable format. `wire_defaults.json` lists every one of them for
the models an agent run writes into its history: a change there fails this test, on purpose. Do not re-record it to
make the test pass: give the field a new name instead (an old payload leaves the old one out, meaning its old default).
To list them after adding a field: `python tests/durable_format/test_wire.py > tests/durable_format/wire_defaults.json`
"""

from __future__ import annotations

import inspect
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import pytest
from agent_run_activities import ACTIVITIES
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic_core import to_json

from agent_runs.budget import PayloadBudgetExceeded
from agent_runs.contracts import CloseIfFinal, ModelCallInput, ResumePoint, RunInput, RunOutcome, RunProgress, RunRef
from agent_runs.wire import ReplayedPayloads, compact_json
from agent_runs.wire_shapes import reads_back_unchanged
from agent_runtime.loop_types import (
    BatchCall,
    CallModel,
    LoopConfig,
    LoopState,
    ModelTurn,
    RunTools,
    ToolCallRef,
    ToolInvocation,
)
from agent_runtime.messages import Usage
from telemetry.trace_context import RunTrace

DEFAULTS = Path(__file__).parent / "wire_defaults.json"


def _step() -> ModelCallInput:
    trace = RunTrace(trace_id="0" * 31 + "1", started_at="2026-11-25T21:00:00Z")
    run = RunRef(run_id="r" * 32, session_id="s" * 32, agent="worker", ordinal=3, trace=trace)
    return ModelCallInput(run=run, command=CallModel(iteration=1, tool_choice="auto"), first_seq=30000000001)


def test_defaults_are_left_out_and_read_back() -> None:
    step = _step()
    compact = compact_json(step)
    assert compact == {
        "run": {"run_id": "r" * 32, "session_id": "s" * 32, "agent": "worker", "ordinal": 3,
                "trace": {"trace_id": "0" * 31 + "1", "started_at": "2026-11-25T21:00:00Z"}},
        "command": {"kind": "call_model", "iteration": 1, "tool_choice": "auto"},  # tags stay
        "first_seq": 30000000001,
    }
    assert ModelCallInput.model_validate(compact) == step
    assert ModelCallInput.model_validate(step.model_dump(mode="json")) == step  # the full (old) shape reads too


def test_a_continue_as_new_input_carries_the_loop_state_smaller_and_reads_both_ways() -> None:
    state = LoopState(
        config=LoopConfig(max_iterations=500), phase="awaiting_tools", iteration=8, usage=Usage(input_tokens=10),
        batch=[BatchCall(ref=ToolCallRef(call_id="c1", name="t")), BatchCall(ref=ToolCallRef(call_id="c2", name="u"),
                                                                             decision="approved", action="invoke")],
    )
    step = _step()
    run_input = RunInput(run=step.run, loop_config=state.config, next_position=90, approval_timeout_seconds=60,
                         loop_state=state, pending_command=RunTools(calls=[ToolInvocation(call_id="c1", name="t")]),
                         generation=1)
    compact, full = compact_json(run_input), run_input.model_dump(mode="json")
    assert RunInput.model_validate(compact) == run_input == RunInput.model_validate(full)  # new shape, old shape
    assert compact["pending_command"]["kind"] == "run_tools"
    assert compact["loop_state"]["batch"][0] == {"ref": {"call_id": "c1", "name": "t"}}
    assert len(json.dumps(compact)) < len(json.dumps(full)) * 0.75


def test_values_that_differ_from_the_default_are_written() -> None:
    turn = ModelTurn(tool_calls=[ToolCallRef(call_id="c1", name="t", known=False)], usage=Usage(cost=0.0),
                     has_text=True)
    compact = compact_json(turn)
    assert compact["tool_calls"] == [{"call_id": "c1", "name": "t", "known": False}]
    assert compact["usage"] == {"cost": 0.0}  # cost 0.0 is not "no cost" (None): it is written
    assert compact["has_text"] is True and compact["kind"] == "model_turn"
    assert ModelTurn.model_validate(compact) == turn


def test_user_values_inside_a_payload_are_never_touched() -> None:
    class Carrier(BaseModel):
        data: dict[str, Any] = Field(default_factory=dict)
        note: str | None = None

    carrier = Carrier(data={"empty": None, "zero": 0, "flag": False, "list": []})
    assert compact_json(carrier) == {"data": {"empty": None, "zero": 0, "flag": False, "list": []}}


def test_a_union_that_would_read_back_differently_gets_the_full_dump() -> None:
    class Small(BaseModel):
        model_config = ConfigDict(extra="forbid")
        size: int = 0

    class Big(BaseModel):
        model_config = ConfigDict(extra="forbid")
        size: int = 0
        more: bool = False

    parse = TypeAdapter(Small | Big).validate_python
    big = Big()
    assert parse({}) != big  # left out, both fields would read back as a Small
    assert compact_json(big, parse) == {"size": 0, "more": False}
    assert not reads_back_unchanged(Small | Big)  # its declaration cannot spare the check
    assert compact_json(big, parse, read_as=Small | Big) == {"size": 0, "more": False}


def test_a_replayed_payload_is_built_once_per_value_and_again_when_the_value_changes() -> None:
    replayed = ReplayedPayloads("call_model input", budget=16 * 1024)
    state = LoopState(config=LoopConfig(max_iterations=500), phase="awaiting_model", iteration=1)
    step = _step().model_copy(update={"close": CloseIfFinal(loop_state=state, first_seq=30000000017)})
    first = replayed.payload(step)
    assert first == compact_json(step)
    again = _step().model_copy(update={"close": CloseIfFinal(loop_state=state.model_copy(), first_seq=30000000017)})
    assert replayed.payload(again) is first  # the next episode builds an equal step: it is not compacted again
    state.iteration = 2  # the loop's state changed in place (the step holds it): another value, another payload
    changed = replayed.payload(step)
    assert changed == compact_json(step) and changed["close"]["loop_state"]["iteration"] == 2
    assert replayed.payload(again) is first
    built = replayed.payload(again, replayed=False)  # built for the first time (by a new step): not looked up
    assert built == first and built is not first and replayed.payload(again) is first


def test_a_replayed_payload_over_its_budget_fails_every_time_and_old_payloads_make_room() -> None:
    replayed = ReplayedPayloads("call_model input", budget=400, entries=2)
    too_big = _step().model_copy(update={"first_seq": 10**200})
    for _ in range(2):
        with pytest.raises(PayloadBudgetExceeded, match="call_model input is"):
            replayed.payload(too_big)
    steps = [_step().model_copy(update={"first_seq": n}) for n in (1, 2, 3)]
    first = [replayed.payload(step) for step in steps]
    assert replayed.payload(steps[2]) is first[2] and replayed.payload(steps[1]) is first[1]
    assert replayed.payload(steps[0]) is not first[0]  # the oldest went when the third came
    assert replayed.payload(steps[0]) == first[0]


def test_replayed_payloads_are_bounded_by_their_size_too() -> None:
    """Kept until their JSON (key and payload) reaches the byte bound, the oldest going first; one larger than the
    whole bound is built and not kept. (A count alone let a cache of payloads near the budget hold ~70 MB of JSON.)"""
    steps = [_step().model_copy(update={"first_seq": n}) for n in (1, 2, 3)]
    one = len(steps[0].model_dump_json()) + len(to_json(compact_json(steps[0])))  # what each entry is charged
    replayed = ReplayedPayloads("call_model input", budget=16 * 1024, entries=100, max_bytes=2 * one + 10)
    first = [replayed.payload(step) for step in steps]
    assert replayed.held() == (2, 2 * one)
    assert replayed.payload(steps[2]) is first[2] and replayed.payload(steps[1]) is first[1]
    assert replayed.payload(steps[0]) is not first[0] and replayed.payload(steps[0]) == first[0]  # it went first
    large = _step().model_copy(update={"first_seq": 10**1500})  # a payload alone over the whole bound
    built = replayed.payload(large)
    assert built == compact_json(large) and replayed.payload(large) is not built  # built each time, not kept
    assert replayed.held() == (2, 2 * one) and replayed.payload(steps[2]) is first[2]  # and the others stay
    replayed.clear()
    assert replayed.held() == (0, 0)


def test_episodes_building_the_same_payload_at_once_keep_it_charged_once() -> None:
    """Episodes on two threads replaying the same step both miss and both build; the second store replaces the first
    and the byte count charges the key once (a double charge would shrink the cache's room for good)."""
    step = _step()
    key = step.model_dump_json()
    both_built = threading.Barrier(2, timeout=10)

    def build() -> ModelCallInput:
        both_built.wait()  # neither stores before both have missed
        return step

    replayed = ReplayedPayloads("call_model input", budget=16 * 1024)
    with ThreadPoolExecutor(2) as pool:
        payloads = list(pool.map(lambda _: replayed.payload_for(key, build), range(2)))
    assert payloads[0] == payloads[1] == compact_json(step)
    assert replayed.held() == (1, len(key) + len(to_json(compact_json(step))))


def _is_tag(annotation: Any) -> bool:
    return get_origin(annotation) is Literal and len(get_args(annotation)) == 1


def _models(annotation: Any, found: dict[str, type[BaseModel]]) -> None:
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        name = f"{annotation.__module__}.{annotation.__qualname__}"
        if name in found:
            return
        found[name] = annotation
        for field in annotation.model_fields.values():
            _models(field.annotation, found)
        return
    for arg in get_args(annotation):
        _models(arg, found)
    if get_origin(annotation) is Annotated:
        _models(get_args(annotation)[0], found)


def wire_defaults() -> dict[str, str]:
    """Every omittable field of every model an agent run writes into its history, with its default."""
    found: dict[str, type[BaseModel]] = {}
    for root in (RunInput, RunProgress, RunOutcome, ResumePoint):
        _models(root, found)
    for activity in ACTIVITIES.values():
        _models(activity.input_model, found)
        _models(activity.output_type, found)
    defaults = {}
    for name, model in sorted(found.items()):
        for field_name, field in model.model_fields.items():
            if not field.is_required() and not _is_tag(field.annotation):
                defaults[f"{name}.{field_name}"] = repr(field.get_default(call_default_factory=True))
    return defaults


def test_the_defaults_of_durable_payloads_stay_as_histories_in_flight_read_them() -> None:
    recorded = json.loads(DEFAULTS.read_text())
    now = wire_defaults()
    changed = {k: (v, now[k]) for k, v in recorded.items() if k in now and now[k] != v}
    assert not changed, (
        f"defaults of durable payload fields changed (recorded, now): {changed}. A payload in flight that left the "
        "field out would now read differently: keep the default, or give the field a new name."
    )
    gone = sorted(set(recorded) - set(now))
    added = sorted(set(now) - set(recorded))
    if gone or added:
        pytest.fail(f"durable payload fields without their recorded default: gone {gone}, new {added}; a field left "
                    "out of a payload must keep reading as it did: list new ones in wire_defaults.json (module doc)")


if __name__ == "__main__":
    print(json.dumps(wire_defaults(), indent=1))
