"""How the `workflow` orchestrator runs each kind of step as durable tasks (activities, child runs, timers,
events). Each executor returns the step's `StepResult`, or None when the workflow was cancelled meanwhile.

Every wait races the workflow's `cancel` event, with fresh waiters and a fresh timer per race (a task shared by two
races is missing from the second on the host's side: see `orchestrators.external_events`); events that arrived while
no race was on are taken from the older waiters first, so none is lost. Gate decisions and signals each have an
event name of their own (`approval:<approval_id>`, `signal:<name>:<index>`), never shared: the SDK keeps one
deferred event per name, overwritten by a second and replayed to every later waiter of the name.

Signals are queues per name in the store (the API appends, then rings): the workflow consumes signal `index` of a
name (its next queue position, kept in the driver's state across continue-as-new) when its event rings, or when the
following signal's event rings (then this one's ring was lost), or when the store already holds it (a ring dropped
by continue-as-new, or one that came before this execution). Child runs are `agent_run`
sub-orchestrations with the run id as instance id, so they are ordinary runs (pollable, approvable and cancellable
through `/api/runs/{id}`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import azure.durable_functions as df
from azure.durable_functions.models.Task import TaskBase
from pydantic import BaseModel

from agent_runs.budget import PayloadBudgetExceeded, within_budget
from agent_runs.contracts import ORCHESTRATOR_NAME as AGENT_RUN_ORCHESTRATOR
from agent_runs.contracts import approval_event_name
from orchestrators.external_events import ExternalEvents
from orchestrators.failures import ACTIVITY_FAILED, failure_code, report
from orchestrators.tasks import drain, failed
from workflow_runtime.contracts import (
    CANCEL_EVENT,
    AgentRunsRecord,
    DelayRecord,
    GateOpened,
    GateRecord,
    GateRequest,
    SignalProbe,
    SignalRecord,
    StartedRuns,
    StepResult,
    Waiting,
    WorkflowStatus,
    signal_event,
)
from workflow_runtime.definition import ApprovalStep, DelayStep, Escalate, SignalStep
from workflow_runtime.driver import ExecuteStep, WorkflowDriver

ACTIVITY_RETRY = df.RetryOptions(first_retry_interval_in_milliseconds=2000, max_number_of_attempts=3)
Steps = Generator[Any, Any, StepResult | None]


class Activities:
    """Names of the workflow activities (the function names registered in function_app)."""

    start_agents = "workflow_start_agents"
    record_agents = "workflow_record_agents"
    flag_children_cancelled = "workflow_flag_children_cancelled"
    call_function = "workflow_call_function"
    evaluate = "workflow_evaluate"
    resolve_time = "workflow_resolve_time"
    record_delay = "workflow_record_delay"
    find_signal = "workflow_find_signal"
    record_signal = "workflow_record_signal"
    open_gate = "workflow_open_gate"
    expire_gate = "workflow_expire_gate"
    record_gate = "workflow_record_gate"
    finish = "workflow_finish"


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


@dataclass
class StepRunner:
    context: df.DurableOrchestrationContext
    driver: WorkflowDriver
    _events: dict[str, ExternalEvents] = field(default_factory=dict)
    _rings: dict[str, RingOnce] = field(default_factory=dict)

    # ----------------------------------------------------------------------------------------------- plumbing

    def publish(self) -> None:
        self.context.set_custom_status(within_budget(self.driver.progress().model_dump(mode="json"), "custom status"))

    def publish_final(self) -> None:
        """The closing status: over the budget (a long reason...), the reason is shortened rather than lost."""
        progress = self.driver.progress()
        try:
            self.context.set_custom_status(within_budget(progress.model_dump(mode="json"), "custom status"))
        except PayloadBudgetExceeded:
            short = progress.model_copy(update={"reason": (progress.reason or "")[:200], "child_runs": []})
            self.context.set_custom_status(short.model_dump(mode="json"))

    def activity(self, name: str, payload: BaseModel | dict[str, Any]) -> TaskBase:
        body = payload.model_dump(mode="json") if isinstance(payload, BaseModel) else payload
        return self.context.call_activity_with_retry(name, ACTIVITY_RETRY, within_budget(body, f"{name} input"))

    def request(self, command: ExecuteStep) -> dict[str, Any]:
        return {
            "ref": self.driver.ref.model_dump(mode="json"),
            "step_id": command.step_id,
            "key": command.key,
            "seq": command.seq,
            "refs": dict(self.driver.state.refs),
            "at": self.context.current_utc_datetime.isoformat(),
        }

    def wait(self, status: WorkflowStatus, waiting: Waiting | None) -> None:
        self.driver.status = status
        self.driver.waiting = waiting
        self.publish()

    def resume(self) -> None:
        self.driver.status = "in_progress"
        self.driver.waiting = None

    def events(self, name: str) -> ExternalEvents:
        """The waiters of one event name, kept for the whole execution (an event may land on an older one)."""
        return self._events.setdefault(name, ExternalEvents(self.context, name))

    def ring(self, name: str) -> RingOnce:
        """The waiters of a once-only event name, kept for the whole execution."""
        return self._rings.setdefault(name, RingOnce(self.context, name))

    def cancel_waiter(self) -> TaskBase:
        """A fresh cancel waiter, for one race."""
        return self.events(CANCEL_EVENT).waiter()

    def cancel_received(self) -> bool:
        """Whether a cancel arrived (in a race, or while none was on); it is then handled."""
        return self.events(CANCEL_EVENT).take() is not None

    def timer(self, until: datetime) -> TaskBase:
        return self.context.create_timer(until)

    # ----------------------------------------------------------------------------------------------- steps

    def run(self, command: ExecuteStep) -> Steps:
        """Run the step; an activity that failed for good (after its retries) or a payload over the budget fails the
        step with a stable code and a safe message (the detail goes to the log, under a correlation id)."""
        try:
            return (yield from self._executor(command)(command))
        except Exception as error:
            self.resume()
            self.driver.child_runs = []
            code = failure_code(error)
            message = report(self.context, code, f"step '{command.step_id}'", error)
            return StepResult(step_id=command.step_id, status="failed", code=code, error=message, journaled=False)

    def _executor(self, command: ExecuteStep) -> Callable[[ExecuteStep], Steps]:
        return {
            "agent": self.agents,
            "parallel": self.agents,
            "function": self.function,
            "test": self.test,
            "delay": self.delay,
            "signal": self.signal,
            "approval": self.approval,
        }[command.op]

    def agents(self, command: ExecuteStep) -> Steps:
        started = StartedRuns.model_validate((yield self.activity(Activities.start_agents, self.request(command))))
        if started.cancelled:
            return None
        if started.error:
            return StepResult(step_id=command.step_id, status="failed", error=started.error, journaled=False)
        run_ids = [run.run.run_id for run in started.runs]
        children = [
            self.context.call_sub_orchestrator(
                AGENT_RUN_ORCHESTRATOR, within_budget(run.model_dump(mode="json"), "run input"), run.run.run_id
            )
            for run in started.runs
        ]
        self.driver.child_runs = run_ids
        self.publish()
        batch = self.context.task_all(children)
        cancelled = self.cancel_received()  # arrived while the runs were being created: they start, flagged
        if not cancelled:
            cancel = self.cancel_waiter()
            cancelled = (yield self.context.task_any([batch, cancel])) is cancel
        if cancelled:
            self.wait("cancelling", None)
            yield self.activity(Activities.flag_children_cancelled, {"run_ids": run_ids})
            yield from drain(batch)
            self.driver.child_runs = []
            return None
        failure = None
        if failed(batch):  # the child run's own record says why; its orchestration's failure text is for the log
            failure = "a child run crashed: " + report(self.context, ACTIVITY_FAILED, "a child run", batch.result)
        record = AgentRunsRecord(**self.request(command), run_ids=run_ids, failure=failure)
        result = yield self.activity(Activities.record_agents, record)
        self.driver.child_runs = []
        return StepResult.model_validate(result)

    def function(self, command: ExecuteStep) -> Steps:
        return StepResult.model_validate((yield self.activity(Activities.call_function, self.request(command))))

    def test(self, command: ExecuteStep) -> Steps:
        return StepResult.model_validate((yield self.activity(Activities.evaluate, self.request(command))))

    def delay(self, command: ExecuteStep) -> Steps:
        step = self.driver.definition.step(command.step_id)
        assert isinstance(step, DelayStep)
        if step.until is not None:
            until = datetime.fromisoformat((yield self.activity(Activities.resolve_time, self.request(command))))
        else:
            until = self.context.current_utc_datetime + timedelta(seconds=step.seconds or 0)
        if (yield from self.sleep(until)):
            return None
        result = yield self.activity(Activities.record_delay, DelayRecord(**self.request(command), until=until))
        return StepResult.model_validate(result)

    def signal(self, command: ExecuteStep) -> Steps:
        """Consume the next signal of the step's name (see the module docstring), or time out, or be cancelled."""
        step = self.driver.definition.step(command.step_id)
        assert isinstance(step, SignalStep)
        index = self.driver.state.signals.get(step.name, 1)
        this, following = self.ring(signal_event(step.name, index)), self.ring(signal_event(step.name, index + 1))
        arrived = this.rang() or following.rang()
        if not arrived:
            probe = SignalProbe(ref=self.driver.ref, name=step.name, index=index)
            arrived = bool((yield self.activity(Activities.find_signal, probe))["found"])
        if not arrived:
            cancel = self.cancel_waiter()
            timer = None
            if step.timeout_seconds is not None:
                timer = self.timer(self.context.current_utc_datetime + timedelta(seconds=step.timeout_seconds))
            self.wait("waiting", Waiting(signal=step.name, signal_index=index))
            yield self.context.task_any([this.waiter(), following.waiter(), cancel, *([timer] if timer else [])])
            self.resume()
            arrived = this.rang() or following.rang()
            if timer is not None and not timer.is_completed:
                timer.cancel()  # an uncancelled timer would keep the instance running until it fires
            if not arrived and cancel.is_completed:
                return None
        record = SignalRecord(**self.request(command), name=step.name, index=index if arrived else None)
        result = StepResult.model_validate((yield self.activity(Activities.record_signal, record)))
        if arrived:
            self.driver.state.signals[step.name] = index + 1  # consumed: exactly once, whatever rings later
        return result

    def approval(self, command: ExecuteStep) -> Steps:
        step = self.driver.definition.step(command.step_id)
        assert isinstance(step, ApprovalStep)
        level, timeout = 0, step.timeout_seconds
        while True:
            expires_at = self.context.current_utc_datetime + timedelta(seconds=timeout)
            opened = GateOpened.model_validate(
                (yield self.activity(
                    Activities.open_gate, GateRequest(**self.request(command), level=level, expires_at=expires_at)
                ))
            )
            outcome = yield from self._await_decision(command, opened, level)
            if outcome is None:
                return None
            if outcome != "expired" or not isinstance(step.on_timeout, Escalate) or level > 0:
                break
            level, timeout = 1, step.on_timeout.timeout_seconds
        record = GateRecord(
            **self.request(command), approval_id=opened.approval_id, level=level, timed_out=outcome == "expired"
        )
        return StepResult.model_validate((yield self.activity(Activities.record_gate, record)))

    def _await_decision(
        self, command: ExecuteStep, opened: GateOpened, level: int
    ) -> Generator[Any, Any, str | None]:
        """'decided' or 'expired' (after the deadline, unless a decision came first); None when cancelled.
        Each wait races a decision, the deadline and cancel afresh; what arrived between waits is taken first."""
        self.wait("requires_action", Waiting(approval_id=opened.approval_id, until=opened.expires_at))
        decisions = self.events(approval_event_name(opened.approval_id))  # this gate level's own name
        while True:
            if self.cancel_received():
                self.resume()
                return None
            if decisions.take() is not None:  # rang in a race, or before the first (then the SDK deferred it)
                self.resume()
                return "decided"
            timer = self.timer(opened.expires_at)
            yield self.context.task_any([decisions.waiter(), timer, self.cancel_waiter()])
            if not timer.is_completed:
                timer.cancel()
                continue  # take what arrived: cancel first, else the decision
            self.resume()
            # The store decides: a decision stored before the expiry (its ring still on the way) wins.
            gate = GateRecord(**self.request(command), approval_id=opened.approval_id, level=level)
            expired = yield self.activity(Activities.expire_gate, gate)
            return "expired" if expired["status"] == "expired" else "decided"

    def sleep(self, until: datetime) -> Generator[Any, Any, bool]:
        """Wait until a time (a delay, a monitor's pause); True when cancelled meanwhile."""
        if self.cancel_received():
            return True
        self.wait("waiting", Waiting(until=until))
        timer, cancel = self.timer(until), self.cancel_waiter()
        winner = yield self.context.task_any([timer, cancel])
        self.resume()
        if winner is cancel:
            timer.cancel()
            return True
        return False
