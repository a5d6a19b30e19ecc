"""How the `workflow` orchestrator waits: the durable tasks and event bookkeeping behind the driver's wait requests
(child runs, sleeps, signals, gate decisions), each answered with the driver's event.

Every wait races the workflow's `cancel` event, with fresh waiters and a fresh timer per race (a task shared by two
races is missing from the second on the host's side: see `orchestrators.external_events`); the waiters of an event
name are kept for the whole execution, so an event that arrived while no race was on is found on an older one. Gate
decisions and signals each have an event name of their own (`approval:<approval_id>`, `signal:<name>:<index>`),
never shared: the SDK keeps one deferred event per name, overwritten by a second and replayed to every later waiter
of the name. Child runs are `agent_run` sub-orchestrations with the run id as instance id, so they are ordinary
runs (pollable, approvable and cancellable through `/api/runs/{id}`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import azure.durable_functions as df
from azure.durable_functions.models.Task import TaskBase

from agent_runs.budget import within_budget
from agent_runs.contracts import ORCHESTRATOR_NAME as AGENT_RUN_ORCHESTRATOR
from agent_runs.contracts import RunInput
from orchestrators.external_events import ExternalEvents
from orchestrators.failures import ACTIVITY_FAILED, report
from orchestrators.tasks import drain, failed
from workflow_runtime.contracts import CANCEL_EVENT, child_failed_event
from workflow_runtime.requests import Cancelled, ChildRunsDrained, ChildRunsEnded, Rang, Silent, TimerFired

Waited = Generator[Any, Any, Rang | TimerFired | Cancelled]


@dataclass
class RingOnce:
    """The waiters of an event name that rings at most once (one signal's): whether any of them received it."""

    context: df.DurableOrchestrationContext
    name: str
    waiters: list[TaskBase] = field(default_factory=list)

    def waiter(self) -> TaskBase:
        """A new waiter, for one race (a waiter that lost a race stays open and may receive the event later)."""
        waiter = self.context.wait_for_external_event(self.name)
        self.waiters.append(waiter)
        return waiter

    def rang(self) -> bool:
        return any(waiter.is_completed for waiter in self.waiters)


class WorkflowWaits:
    """`publish` sets the workflow's progress as the custom status: called before every wait, so pollers see what
    the workflow waits for."""

    def __init__(self, context: df.DurableOrchestrationContext, publish: Callable[[], None]) -> None:
        self._context = context
        self.publish = publish
        self._events: dict[str, ExternalEvents] = {}
        self._rings: dict[str, RingOnce] = {}
        self._children: TaskBase | None = None
        self._each_child: list[TaskBase] = []  # a fail-fast step's children, drained one by one

    def take_cancel(self) -> Cancelled | Silent:
        """A cancel that arrived (in a race, or while none was on), now handled; else Silent."""
        return Cancelled() if self._cancel_received() else Silent()

    def check_signal(self, events: list[str]) -> Rang | Silent:
        return Rang() if any(self._ring(name).rang() for name in events) else Silent()

    def run_children(
        self, runs: list[RunInput], fail_fast: bool = False
    ) -> Generator[Any, Any, ChildRunsEnded | Cancelled]:
        """Start the step's child runs and wait for them to end (or the cancel). `fail_fast`: also for the first of
        them to ring that it failed (`child_failed_event`, raised by the run itself); the others are then still
        running, and the step cancels them."""
        children = [
            self._context.call_sub_orchestrator(
                AGENT_RUN_ORCHESTRATOR, within_budget(run.model_dump(mode="json"), "run input"), run.run.run_id
            )
            for run in runs
        ]
        batch = self._children = self._context.task_all(children)
        self._each_child = children if fail_fast else []
        if self._cancel_received():  # arrived while the runs were being created: they start, then are flagged
            return Cancelled()
        cancel = self._cancel_waiter()
        rings = [self._context.wait_for_external_event(child_failed_event(run.run.run_id)) for run in runs] if (
            fail_fast) else []
        self.publish()
        if (yield self._context.task_any([batch, cancel, *rings])) is cancel:
            return Cancelled()
        # The SDK fails `task_all` at its first failed child (a crashed orchestration), but the host replays it as
        # C#'s WhenAll, which waits for every child: going on before the host does schedules work it replays in
        # another order (the workflow then fails as non-deterministic). So the step waits for the other children
        # too, or the cancel (or a ring), as the host does; the same tasks, nothing new for the host to await.
        yield from until_each_ended(self._context, children, [cancel, *rings])
        if cancel.is_completed:
            return Cancelled()
        crash = None
        if failed(batch):  # the child run's own record says why; its orchestration's failure text is for the log
            crash = report(self._context, ACTIVITY_FAILED, "a child run", batch.result)
        if any(ring.is_completed for ring in rings):  # a child failed: the ones still running are cancelled
            still = [run.run.run_id for run, child, ring in zip(runs, children, rings, strict=True)
                     if not child.is_completed and not ring.is_completed]
            return ChildRunsEnded(crash=crash, running=still)
        return ChildRunsEnded(crash=crash)

    def drain_children(self) -> Generator[Any, Any, ChildRunsDrained]:
        """Let the step's child runs end. A fail-fast step's are awaited one by one, until every one ended: `task_all`
        ends at its first failed child (one crashed before the ring, or while cancelled), while the host's WhenAll
        waits for every child (see `run_children`). Other steps keep the single wait their histories hold."""
        if self._children is not None:
            self.publish()
            if self._each_child:
                yield from until_each_ended(self._context, self._each_child)
            else:
                yield from drain(self._children)
            self._children = None
            self._each_child = []
        return ChildRunsDrained()

    def sleep(self, until: datetime) -> Generator[Any, Any, TimerFired | Cancelled]:
        if self._cancel_received():
            return Cancelled()
        timer, cancel = self._context.create_timer(until), self._cancel_waiter()
        self.publish()
        if (yield self._context.task_any([timer, cancel])) is cancel:
            timer.cancel()  # an uncancelled timer would keep the instance running until it fires
            return Cancelled()
        return TimerFired()

    def pause(self, until: datetime) -> Generator[Any, Any, TimerFired]:
        self.publish()
        yield self._context.create_timer(until)
        return TimerFired()

    def wait_for_signal(self, events: list[str], until: datetime | None) -> Waited:
        """One race of the events' fresh waiters, the timer and cancel; an event that rang on an older waiter counts.
        What arrived since the step checked the older waiters (while it probed the store) landed on one of them, not
        on this race's: it is taken first, else the race would wait on. A signal that arrived wins over a cancel (the
        cancel is taken at the next step)."""
        rings = [self._ring(name) for name in events]
        if any(ring.rang() for ring in rings):
            return Rang()
        if self._cancel_received():
            return Cancelled()
        cancel = self._cancel_waiter()
        timer = self._context.create_timer(until) if until is not None else None
        self.publish()
        yield self._context.task_any([*(ring.waiter() for ring in rings), cancel, *([timer] if timer else [])])
        if timer is not None and not timer.is_completed:
            timer.cancel()
        if any(ring.rang() for ring in rings):
            return Rang()
        return Cancelled() if cancel.is_completed else TimerFired()

    def wait_for_decision(self, event: str, until: datetime) -> Waited:
        """Race the decision's event, the deadline and cancel afresh until one of them happened; what arrived
        between races is taken first, cancel before the decision."""
        decisions = self._events_named(event)  # this gate level's own name
        while True:
            if self._cancel_received():
                return Cancelled()
            if decisions.take() is not None:  # rang in a race, or before the first (then the SDK deferred it)
                return Rang()
            timer = self._context.create_timer(until)
            race = [decisions.waiter(), timer, self._cancel_waiter()]
            self.publish()
            yield self._context.task_any(race)
            if timer.is_completed:
                return TimerFired()
            timer.cancel()  # take what arrived: cancel first, else the decision

    # ----------------------------------------------------------------------------------------------- bookkeeping

    def _events_named(self, name: str) -> ExternalEvents:
        return self._events.setdefault(name, ExternalEvents(self._context, name))

    def _ring(self, name: str) -> RingOnce:
        return self._rings.setdefault(name, RingOnce(self._context, name))

    def cancels(self) -> ExternalEvents:
        """The workflow's cancel events (for a wait of its own to race; what it receives is taken here)."""
        return self._events_named(CANCEL_EVENT)

    def _cancel_waiter(self) -> TaskBase:
        return self.cancels().waiter()

    def _cancel_received(self) -> bool:
        return self.cancels().take() is not None


def until_each_ended(
    context: df.DurableOrchestrationContext, children: list[TaskBase], races: list[TaskBase] | None = None
) -> Generator[Any, Any, None]:
    """Wait until every child has ended (one at a time, as the host's WhenAll waits for each) or one of `races` has
    fired: the same tasks each time, nothing new for the host to await."""
    races = races or []
    while not any(race.is_completed for race in races) and (
        running := [child for child in children if not child.is_completed]
    ):
        yield context.task_any([*running, *races])
