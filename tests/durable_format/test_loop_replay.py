"""`orchestrators.loop_replay`: an episode that goes on from the driver the last episode left decides exactly what a
replay from scratch decides, and nothing is carried over a history that is not the one the driver was left on.

The recorded `agent_run` histories (`golden/`) are cut into their episodes and run one after the other, as a host
runs them: each episode twice, once from scratch (nothing carried) and once with what the episode before it left.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from golden_histories import ORCHESTRATOR_STARTED, TASK_COMPLETED, cases, run_episode

from devhost.invoke import OrchestratorOutput
from devhost.protocol.actions import Action, ActionType
from orchestrators import agent_run, loop_replay
from orchestrators.loop_replay import CARRIED, Carried, _CarriedEpisodes, _text_chars


def episodes(history: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The history each episode ran over: up to the next episode's start, earlier episodes' events played."""
    starts = [i for i, event in enumerate(history) if event["EventType"] == ORCHESTRATOR_STARTED]
    ends = [*starts[1:], len(history)]
    return [[{**event, "IsPlayed": i < start} for i, event in enumerate(history[:end])]
            for start, end in zip(starts, ends, strict=True)]


@contextmanager
def taken_carries() -> Iterator[list[Carried | None]]:
    """What each episode took from the one before it."""
    taken: list[Carried | None] = []
    take = agent_run.take_carried

    def spy(context: Any) -> Carried | None:
        taken.append(take(context))
        return taken[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(agent_run, "take_carried", spy)
        yield taken


def from_scratch(case: dict[str, Any], events: list[dict[str, Any]]) -> OrchestratorOutput:
    """The episode with nothing carried, leaving what was carried as it was."""
    kept = CARRIED.take(case["instance_id"])
    try:
        return run_episode(case, events)
    finally:
        CARRIED.take(case["instance_id"])
        if kept is not None:
            CARRIED.keep(case["instance_id"], kept)


def assert_same(carried: OrchestratorOutput, scratch: OrchestratorOutput) -> None:
    assert carried.error is None and scratch.error is None, (carried.error, scratch.error)
    assert carried == scratch
    # The SDK's own JSON of each action, payloads byte for byte (devhost keeps each action's text as the SDK wrote it).
    assert scratch.action_texts and carried.action_texts == scratch.action_texts


@pytest.mark.parametrize("case", cases(), ids=lambda case: case["case"])
def test_an_episode_going_on_from_the_carried_driver_decides_as_a_replay_from_scratch(case: dict[str, Any]) -> None:
    CARRIED.take(case["instance_id"])
    with taken_carries() as taken:
        for events in episodes(case["history"]):
            scratch = from_scratch(case, events)
            assert_same(run_episode(case, events), scratch)
    carried = [carry is not None for carry in taken[1::2]]  # (every other episode ran from scratch)
    for carry in filter(None, taken):  # counted episode by episode, as a count of the whole history would count it
        assert carry.history_chars == sum(_text_chars(fields) for fields in carry.history) > 0
    if case["case"] == "approval":
        # the episode after the first model call goes on from it; the approval is not a loop step, and nothing after
        # it is carried in this execution
        assert carried == [False, True] + [False] * (len(carried) - 2)
    else:
        # each episode after the first goes on from the one before (until finish_run, which is not a loop step)
        assert carried == [False, True, True, True, True, True, False]


def test_nothing_is_carried_over_a_history_the_driver_was_not_left_on() -> None:
    case = next(case for case in cases() if case["case"] == "five_steps_new_session")
    history = episodes(case["history"])
    CARRIED.take(case["instance_id"])
    for events in history[:3]:
        run_episode(case, events)
    # The next episode's history, with other usage reported by the first model call: the carried driver counted the
    # recorded usage, a replay of this history counts this one (and publishes it).
    changed = copy.deepcopy(history[3])
    first_result = next(event for event in changed if event["EventType"] == TASK_COMPLETED)
    first_result["Result"] = first_result["Result"].replace('"input_tokens":', '"input_tokens":1')
    assert first_result["Result"] != history[3][changed.index(first_result)]["Result"]
    scratch = from_scratch(case, changed)
    with taken_carries() as taken:
        carried = run_episode(case, changed)
    assert taken == [None]
    assert_same(carried, scratch)
    assert carried.custom_status_json != from_scratch(case, history[3]).custom_status_json


def test_a_process_keeps_a_bounded_number_of_carried_episodes() -> None:
    carried = _CarriedEpisodes(instances=2)
    left = [Carried(history=[], direct=True, start=None, steps=(), driver=None, command=None)  # type: ignore[arg-type]
            for _ in range(3)]
    for instance, carry in zip("abc", left, strict=True):
        carried.keep(instance, carry)
    assert carried.take("a") is None  # the oldest went when the third came
    assert carried.take("b") is left[1] and carried.take("b") is None  # taken once
    carried.drop("c", left[0])
    assert carried.take("c") is left[2]  # dropped only by the episode that kept it
    assert loop_replay.CARRIED_INSTANCES >= 64


def _carry(history_chars: int) -> Carried:
    return Carried(history=[], direct=True, start=None, steps=(), driver=None, command=None,  # type: ignore[arg-type]
                   history_chars=history_chars)


def test_a_process_keeps_carried_episodes_bounded_by_the_size_of_their_histories() -> None:
    carried = _CarriedEpisodes(instances=10, history_chars=100)
    a, b, c = _carry(60), _carry(30), _carry(30)
    carried.keep("a", a)
    carried.keep("b", b)
    carried.keep("c", c)  # 120 characters: the oldest goes
    assert carried.take("a") is None
    carried.keep("b", b)  # kept again: counted once
    carried.keep("d", _carry(40))
    assert carried.take("c") is c and carried.take("b") is b
    carried.keep("e", _carry(101))  # larger than the whole bound: not kept, and nothing else goes for it
    assert carried.take("e") is None and carried.take("d") is not None
    carried.keep("f", _carry(100))  # everything taken: the whole bound is free again
    assert carried.take("f") is not None
    assert loop_replay.CARRIED_HISTORY_CHARS >= 1_000_000


def _races_of(output: OrchestratorOutput, activity: str) -> list[Action]:
    """The races (`task_any`) around each scheduling of `activity`."""
    def holds(action: Action) -> bool:
        return action.function_name == activity or any(holds(child) for child in action.children)

    return [action for group in output.action_groups for action in group
            if action.type is ActionType.WhenAny and holds(action)]


def test_a_batch_of_one_tool_call_is_raced_as_it_is_and_a_model_call_too() -> None:
    # One task races cancel directly: a `task_all` of one would cost the SDK and the host a compound action on every
    # replay. The work is the SDK's retry compound (WhenAll of the CallActivityWithRetry) in both races.
    case = next(case for case in cases() if case["case"] == "five_steps_new_session")
    CARRIED.take(case["instance_id"])
    output = from_scratch(case, episodes(case["history"])[-2])
    for activity in ("invoke_tool", "call_model"):
        races = _races_of(output, activity)
        assert races
        for race in races:
            work, cancel = race.children
            assert cancel.type is ActionType.WaitForExternalEvent
            assert work.type is ActionType.WhenAll and [child.function_name for child in work.children] == [activity]
