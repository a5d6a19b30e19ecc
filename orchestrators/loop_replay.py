"""Carrying an `agent_run` episode's driver to the next episode, so a replay does not work out every loop step again.

Every episode replays the whole history. For each earlier model call and tool batch, `agent_run` builds the activity
input, races it with cancel, validates the result and feeds it to the driver, only to reach the state the previous
episode had reached when it stopped to wait. An episode that stops waiting on a loop step leaves that state here:
its driver, and the loop steps that led to it as the SDK was handed them (activity payloads, custom status). The
next episode of the same instance takes it if, and only if, its history starts with exactly the history the previous
one ran over (every event, field by field, `IsPlayed` aside) and its loop starts with the same command. The
orchestrator being deterministic, the SDK then resumes it the same way, with the same values, up to the step the
previous episode waited on. So the episode hands the SDK the recorded steps again - per step the same tasks with the
same payloads, the same custom status, a fresh cancel waiter and the same race, in the same order, as `agent_run`
would - and goes on from the waited-on step with the driver left there.

Nothing else is carried. After a step of another kind in the loop (approvals, a cancel), in another process, after a
restart or an eviction, or over a history that does not start with the recorded one, the episode replays as before.
"""

from __future__ import annotations

import threading
from collections.abc import Generator
from dataclasses import dataclass
from functools import partial
from typing import Any

import azure.durable_functions as df

from agent_runs.driver import RunDriver
from agent_runtime.loop_types import LoopCommand
from durable_steps.activity import Activity
from orchestrators.external_events import ExternalEvents
from orchestrators.tasks import StepTasks, failed

# Instances whose last episode is kept (the oldest goes first): a driver and a history's worth of event fields each.
CARRIED_INSTANCES = 256
# ... and the characters of those histories' text fields (inputs, results), in all: a history may carry payloads of
# hundreds of KB (a long system prompt in the run's input), so a count alone could hold hundreds of MB.
CARRIED_HISTORY_CHARS = 32_000_000
# What the SDK changes on a history event between episodes (`IsPlayed`) and while it replays (`is_processed`).
_VOLATILE_FIELDS = ("_is_played", "_is_processed")


def _event_fields(event: Any) -> dict[str, Any]:
    """A history event as the SDK parsed it, without what changes between episodes. A field the SDK renamed or added
    that changes too makes two episodes' events differ: the episode then replays as before."""
    fields = vars(event).copy()
    try:  # (one statement: half the cost of a pop call per field, for each event of every episode)
        del fields["_is_played"], fields["_is_processed"]
    except KeyError:  # the SDK dropped one of them: whatever is left
        for name in _VOLATILE_FIELDS:
            fields.pop(name, None)
    return fields


def _text_chars(fields: dict[str, Any]) -> int:
    """Characters of an event's text fields: what its size in memory grows with (the rest is a few scalars)."""
    return sum(len(value) for value in fields.values() if isinstance(value, str))


@dataclass(frozen=True)
class LoopStep:
    """A model call or a tool batch as the SDK is handed it: the activity, its payloads and the custom status
    published before its race (None until it is published)."""

    activity: Activity[Any, Any]
    payloads: tuple[dict[str, Any], ...]
    status: dict[str, Any] | None = None

    def schedule(self, context: df.DurableOrchestrationContext) -> StepTasks:
        """The step's tasks (one per payload), and the work to race with cancel. Histories in flight replay whether a
        single task is gathered or not: the host matches scheduled activities by their order, not by the compound
        actions around them (docs/durable-protocol.md §1.4)."""
        return StepTasks(context, [partial(self.activity.schedule, context, payload) for payload in self.payloads])


@dataclass(frozen=True)
class Carried:
    """What an episode that waits on a loop step leaves for the next one."""

    history: list[dict[str, Any]]
    """The fields of every event of the history the episode ran over."""
    direct: bool
    """Nothing came before the loop (no task): an episode over the same history goes straight to the loop."""
    start: LoopCommand
    """The loop's first command."""
    steps: tuple[LoopStep, ...]
    """The loop's steps, the last one the step waited on."""
    driver: RunDriver
    """The driver as the waited-on step left it (scheduled, its result not fed back)."""
    command: LoopCommand
    """The waited-on step's command."""
    history_chars: int = 0
    """Characters of `history`'s text fields (what the process's bound counts)."""


class _CarriedEpisodes:
    """The carried episodes of this process, by instance (episodes of one instance never overlap; taking is atomic
    all the same, so an episode's driver goes to one episode at most). Bounded in instances and in the characters of
    their histories; the oldest go first, and one larger than the whole bound is not kept (its next episode replays)."""

    def __init__(self, instances: int, history_chars: int = CARRIED_HISTORY_CHARS) -> None:
        self._instances = instances
        self._max_chars = history_chars
        self._carried: dict[str, Carried] = {}
        self._chars = 0  # `history_chars` of the carried, summed
        self._lock = threading.Lock()

    def keep(self, instance_id: str, carried: Carried) -> None:
        with self._lock:
            self._remove(instance_id)
            if carried.history_chars > self._max_chars:
                return
            while self._carried and (len(self._carried) >= self._instances
                                     or self._chars + carried.history_chars > self._max_chars):
                self._remove(next(iter(self._carried)))
            self._carried[instance_id] = carried
            self._chars += carried.history_chars

    def held(self) -> int:
        """Instances whose episode is carried now."""
        with self._lock:
            return len(self._carried)

    def take(self, instance_id: str) -> Carried | None:
        with self._lock:
            return self._remove(instance_id)

    def drop(self, instance_id: str, carried: Carried) -> None:
        with self._lock:
            if self._carried.get(instance_id) is carried:
                self._remove(instance_id)

    def _remove(self, instance_id: str) -> Carried | None:
        carried = self._carried.pop(instance_id, None)
        if carried is not None:
            self._chars -= carried.history_chars
        return carried


CARRIED = _CarriedEpisodes(CARRIED_INSTANCES)


class CarriedStepMismatch(RuntimeError):
    """A carried step did not replay as recorded: the history check admitted an episode it should not have (a bug)."""


def take_carried(context: df.DurableOrchestrationContext) -> Carried | None:
    """What the last episode of this instance left, if this episode replays it: its history starts with exactly the
    history the last one ran over. Taken either way: an episode's driver serves one episode."""
    carried = CARRIED.take(context.instance_id)
    if carried is None:
        return None
    events = context.histories
    if len(events) < len(carried.history):
        return None
    for event, recorded in zip(events, carried.history, strict=False):
        if _event_fields(event) != recorded:
            return None
    return carried


class LoopSteps:
    """One episode's loop steps, from the loop's first command (`start`; `direct`: no task came before the loop):
    what it takes from the last episode (`carried`, checked by `take_carried`) and what it leaves for the next one."""

    def __init__(
        self, context: df.DurableOrchestrationContext, start: LoopCommand, *, direct: bool, carried: Carried | None
    ) -> None:
        self._context = context
        self._start = start
        self._direct = direct
        self._steps: list[LoopStep] = []
        self._carrying = True
        self._recorded = carried.history if carried is not None else []  # fields of the events checked already
        self._recorded_chars = carried.history_chars if carried is not None else 0
        self._history: list[dict[str, Any]] | None = None
        self._history_chars = 0
        self._kept: Carried | None = None

    def fast_forward(self, cancels: ExternalEvents, carried: Carried) -> Generator[Any, Any, LoopStep]:
        """Hand the SDK the carried steps before the waited-on one, as `agent_run` did (their results are the ones
        the driver was fed); returns the waited-on step, whose result the carried driver is waiting for."""
        context = self._context
        for step in carried.steps[:-1]:
            self._expect(cancels.take() is None, "a cancel before a carried step")
            work = step.schedule(context).work
            context.set_custom_status(step.status)
            winner = yield context.task_any([work, cancels.waiter()])
            self._expect(winner is work and not failed(work), "a carried step that did not complete")
            self._steps.append(step)
        self._expect(cancels.take() is None, "a cancel before the waited-on step")
        return carried.steps[-1]

    def stop_carrying(self) -> None:
        """A step of another kind: what follows is not carried (this episode's or a later one's)."""
        self._carrying = False

    def waiting(self, step: LoopStep, status: dict[str, Any], driver: RunDriver, command: LoopCommand) -> None:
        """The episode is about to wait on `step` (its status published): should it stop here, the next episode
        goes on from here."""
        step = LoopStep(step.activity, step.payloads, status)
        self._steps.append(step)
        if not self._carrying:
            return
        history = self._history_fields()
        self._kept = Carried(history, self._direct, self._start, tuple(self._steps), driver, command,
                             self._history_chars)
        CARRIED.keep(self._context.instance_id, self._kept)

    def resumed(self) -> None:
        """The wait is over: the driver moves on, nothing is left for the next episode (until the next wait)."""
        if self._kept is not None:
            CARRIED.drop(self._context.instance_id, self._kept)
            self._kept = None

    def _history_fields(self) -> list[dict[str, Any]]:
        if self._history is None:
            events = self._context.histories
            new = [_event_fields(event) for event in events[len(self._recorded):]]
            self._history = self._recorded + new
            self._history_chars = self._recorded_chars + sum(_text_chars(fields) for fields in new)
        return self._history

    @staticmethod
    def _expect(holds: bool, what: str) -> None:
        if not holds:
            raise CarriedStepMismatch(f"carried loop steps replayed differently: {what}")
