"""`WorkflowDriver`: a workflow run as a pure state machine (the `workflow` orchestrator's brain).

    driver = WorkflowDriver(definition, workflow_input)
    request = driver.start(now)                           # TakeCancel | CallActivity | RunChildRuns | Sleep | ...
    request = driver.send(ActivityCompleted(output=...), now)
    ...                                                   # until ContinueAsNew or Finished

The driver never touches the network, the clock or randomness: it is told the time with every event. It moves the
program counter (branches, monitors, rejected approvals), hands out journal seqs, keeps the references to step
outputs and the signal queue positions, decides when to continue as new, and says what pollers see (`progress`).
The vocabulary of requests and events is in `workflow_runtime.requests`.

Each step is written as straight-line code (a generator) that yields requests and receives events, in exactly the
order the orchestrator used to schedule its durable tasks: the same history replays to the same decisions, so
orchestrations in flight carry on across a deploy. A `Failed` event is raised inside the step at the request that
failed, and ends the step failed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ConfigDict

from activities.workflow_agents import (
    workflow_cancel_children,
    workflow_flag_children_cancelled,
    workflow_record_agents,
    workflow_start_agents,
)
from activities.workflow_finish import workflow_closed_before, workflow_finish
from activities.workflow_gates import workflow_expire_gate, workflow_open_gate, workflow_record_gate
from activities.workflow_steps import (
    workflow_call_function,
    workflow_evaluate,
    workflow_find_signal,
    workflow_record_delay,
    workflow_record_signal,
    workflow_resolve_time,
)
from agent_runs.contracts import FinishResult, approval_event_name
from agent_runs.sequence import seq_for
from agent_runtime.run_result import error_of
from durable_steps import OUTAGE_RETRIES, Activity
from workflow_runtime.contracts import (
    AgentRunsRecord,
    AwaitedChildren,
    ChildRunIds,
    DelayRecord,
    FinalStatus,
    FinishRequest,
    GateRecord,
    GateRequest,
    MonitorState,
    NoResult,
    SignalProbe,
    SignalRecord,
    StepRequest,
    StepResult,
    Waiting,
    WorkflowInput,
    WorkflowOutcome,
    WorkflowProgress,
    WorkflowStatus,
    signal_event,
)
from workflow_runtime.definition import (
    ApprovalStep,
    DelayStep,
    Escalate,
    MonitorStep,
    ParallelStep,
    SignalStep,
    WorkflowDefinition,
)
from workflow_runtime.program import Instruction, Op, compile_program
from workflow_runtime.requests import (
    ActivityCompleted,
    CallActivity,
    Cancelled,
    CheckSignal,
    ChildRunsDrained,
    ChildRunsEnded,
    ContinueAsNew,
    DrainChildRuns,
    Event,
    Failed,
    Finished,
    Pause,
    Rang,
    Request,
    RunChildRuns,
    Silent,
    Sleep,
    TakeCancel,
    TimerFired,
    WaitForDecision,
    WaitForSignal,
)

# Steps (and monitor sleeps) per execution before continuing as new: keeps each episode's replay short, so an
# eternal monitor runs for ever at a flat cost.
STEPS_PER_EXECUTION = 24
CONTROL_ORDINAL = 1  # the workflow's run record is the first (and only) run of its control session
CANCELLED_REASON = "cancelled by the client"
# How long an agent step waits before looking again at a child run rewound on its own that is still running (then
# the last, on): soon for a quick repair, rarely for a long one (each look is a timer and an activity in history,
# which the step continues as new every `LOOKS_PER_EXECUTION` looks). A look also reads the child's orchestration
# status: one that crashed is closed `failed` and ends the step.
REWOUND_CHILD_LOOKS = tuple(timedelta(seconds=s) for s in (1, 2, 4, 8, 15, 30, 60, 120, 300, 900, 1800, 3600))
# Looks per execution before the waiting step continues as new (workflows started with `looks_continue`): each
# execution's history stays a dozen looks long however many days the child runs (an approval it waits for).
LOOKS_PER_EXECUTION = 12

InputT = TypeVar("InputT", bound=BaseModel)
OutputT = TypeVar("OutputT")
EventT = TypeVar("EventT")
RecordT = TypeVar("RecordT", bound=StepRequest)
Flow = Generator[Request, Event, StepResult | None]
"""A step's requests; it returns the step's result, or None when the workflow was cancelled meanwhile."""


class WorkflowDriverError(RuntimeError):
    """An event the driver cannot take now (a bug in the orchestrator), or a workflow that could not be closed."""


class Done(BaseModel):
    """How the workflow ended (before `workflow_finish` recorded it)."""

    model_config = ConfigDict(frozen=True)

    status: FinalStatus
    reason: str
    failed_step: str | None = None
    code: str | None = None  # a failure's stable code (None: `step_failed` when a step failed, else the status)


class _StepRun(BaseModel):
    """The step being run: its instruction, its attempt's key (a monitor check's iteration) and its journal seq."""

    model_config = ConfigDict(frozen=True)

    op: Op
    step_id: str
    key: str
    seq: int
    iteration: int | None = None


class _MonitorPause(BaseModel):
    model_config = ConfigDict(frozen=True)

    until: datetime


class _ClosedMeanwhile(Exception):
    """A step found the workflow's record closed before it acted (`ended` in its activity's output): raised out of
    the steps, the workflow ends as the record says."""

    def __init__(self, ended: FinishResult) -> None:
        super().__init__(ended.reason)
        self.ended = ended


class _StepFailed(Exception):
    """A request of the running flow failed for good: raised at its `yield`."""

    def __init__(self, failure: Failed) -> None:
        super().__init__(failure.message)
        self.failure = failure


class WorkflowDriver:
    """Feed it what happened, it says what to do next. One instance per execution (replayed from its history)."""

    def __init__(self, definition: WorkflowDefinition, workflow_input: WorkflowInput) -> None:
        self.definition = definition
        self.ref = workflow_input.ref
        self.state = workflow_input.state.model_copy(deep=True)
        self.program: list[Instruction] = compile_program(definition)
        self._now: datetime | None = None
        self._executed = 0
        self._current: _StepRun | None = None
        self._done: Done | None = None
        self._status: WorkflowStatus = "in_progress"
        self._waiting: Waiting | None = None
        self._child_runs: list[str] = []
        self._flow: Generator[Request, Event, None] | None = None
        self._finished = False
        self._resume_point: WorkflowInput | None = None  # where a rewind goes on from, once a step failed

    # ------------------------------------------------------------------------------------------------ the protocol

    def start(self, now: datetime) -> Request:
        if self._flow is not None:
            raise WorkflowDriverError("the driver was already started")
        self._now = now
        self._flow = self._workflow()
        return self._emit(next(self._flow))

    def send(self, event: Event, now: datetime) -> Request:
        """What happened to the last request (at the workflow's time `now`); returns the next request."""
        if self._flow is None:
            raise WorkflowDriverError("start the driver first")
        if self._finished:
            raise WorkflowDriverError("the workflow has finished; it takes no more events")
        self._now = now
        try:
            if isinstance(event, Failed):
                return self._emit(self._flow.throw(_StepFailed(event)))
            return self._emit(self._flow.send(event))
        except StopIteration:
            raise WorkflowDriverError("the workflow continued as new (or its driver failed): no more events") from None

    def _emit(self, request: Request) -> Request:
        self._finished = isinstance(request, Finished)
        return request

    @property
    def active_step(self) -> str | None:
        """The step being run (what a failure report names), if any."""
        return self._current.step_id if self._current else None

    # ------------------------------------------------------------------------------------------------ the workflow

    def _workflow(self) -> Generator[Request, Event, None]:
        closed = yield from self._closed_before()
        if closed is not None:
            yield closed
            return
        try:
            done = yield from self._steps()
        except _ClosedMeanwhile as closed:
            yield self._as_recorded(closed.ended)
            return
        if done is None:
            return  # continued as new: the orchestrator has returned
        try:  # the store down: tried again a while, else its record stays open until a poll closes it
            closed = yield from self._keep_trying(workflow_finish, self._finish_request(done))
        except _StepFailed as failed:  # e.g. the references the output needs outgrew the payload budget
            done = self._fail(failed.failure)  # recorded without them; a second failure ends the orchestration
            try:
                closed = yield from self._call(workflow_finish, self._finish_request(done))
            except _StepFailed as again:
                raise WorkflowDriverError(f"the workflow could not be closed: {again.failure.message}") from None
        if closed.ended is not None:  # the store closed it otherwise (a cancel flagged meanwhile): as it says
            done = self._finish(closed.ended.status, closed.ended.reason, code=_code_of(closed.ended))
        self._status = done.status
        yield Finished(
            outcome=WorkflowOutcome(
                run_id=self.ref.run_id, status=done.status, reason=done.reason, failed_step=done.failed_step,
                code=done.code, resume=self._resume_point if done.status == "failed" else None,
            )
        )

    def _closed_before(self) -> Generator[Request, Event, Finished | None]:
        """Before the first step of a workflow's first execution, read its record (workflows started with
        `reads_record_first`: the flag keeps histories from before replaying): one given up by its start (closed
        `start_failed`, the caller answered 5xx) whose orchestration the host started all the same ends as the record
        says, without running a step (the caller's retry runs the work). A read that fails for good fails the
        workflow before its first step, as that step failing would: a rewind starts it from there, without reading
        again (the rewind reopened the record)."""
        if not self.ref.reads_record_first or self.state.generation:
            return None
        try:
            closed = yield from self._call(workflow_closed_before, self.ref)
        except _StepFailed as failed:
            self._fail(failed.failure)
            state = self.state.model_copy(update={"generation": self.state.generation + 1}, deep=True)
            self._resume_point = WorkflowInput(ref=self.ref, state=state)
            return None
        return None if closed is None else self._as_recorded(closed)

    def _as_recorded(self, closed: FinishResult) -> Finished:
        """The end of a workflow whose record was closed before it acted (its start gave it up): as the record says."""
        self._done = Done(status=closed.status, reason=closed.reason)
        self._status = closed.status
        self._current = None
        self._child_runs = []
        self._waiting = None
        outcome = WorkflowOutcome(
            run_id=self.ref.run_id, status=closed.status, reason=closed.reason, code=_code_of(closed)
        )
        return Finished(outcome=outcome, closed_before=True)

    @staticmethod
    def _unless_closed(ended: FinishResult | None) -> None:
        """A step activity read the workflow's record (as it does anyway) and found it closed: it did nothing."""
        if ended is not None:
            raise _ClosedMeanwhile(ended)

    def _steps(self) -> Generator[Request, Event, Done | None]:
        """Run steps until the workflow is done (its `Done`), or it continued as new (None)."""
        while True:
            command = self._next_command()
            if isinstance(command, Done):
                return command
            try:
                if isinstance(_expect((yield TakeCancel()), Cancelled, Silent), Cancelled):  # arrived meanwhile
                    self._cancel()
                    continue
                if isinstance(command, ContinueAsNew):
                    yield command
                    return None
                if isinstance(command, _MonitorPause):
                    if (yield from self._sleep(command.until)):
                        self._cancel()
                    else:
                        self._on_slept()
                    continue
            except _StepFailed as failed:  # e.g. the continue-as-new input outgrew the payload budget
                self._fail(failed.failure)
                continue
            result = yield from self._run_step(command)
            if result is None:
                self._cancel()
            else:
                self._on_result(result)

    def _next_command(self) -> _StepRun | _MonitorPause | ContinueAsNew | Done:
        if self._done is not None:
            return self._done
        while self.state.pc < len(self.program) and self.program[self.state.pc].op == "jump":
            self.state.pc = self.program[self.state.pc].branch_target()
        if self.state.pc >= len(self.program):
            return self._finish("completed", "all steps completed")
        if self.state.awaiting is not None:  # a step waiting for a rewound child continued as new: it goes on
            awaiting = self.state.awaiting
            self._current = _StepRun(
                op=cast(Op, awaiting.op), step_id=awaiting.step_id, key=awaiting.key, seq=awaiting.seq,
                iteration=awaiting.iteration,
            )
            return self._current
        if self._executed >= STEPS_PER_EXECUTION:
            state = self.state.model_copy(update={"generation": self.state.generation + 1})
            return ContinueAsNew(input=WorkflowInput(ref=self.ref, state=state))
        instruction = self.program[self.state.pc]
        if instruction.op == "monitor":
            return self._monitor_command(instruction)
        attempt = self.state.attempts.get(instruction.step_id, 0)
        key = f"{instruction.step_id}.r{attempt}" if attempt else instruction.step_id
        self._current = _StepRun(op=instruction.op, step_id=instruction.step_id, key=key, seq=self._allocate())
        return self._current

    def _monitor_command(self, instruction: Instruction) -> _StepRun | _MonitorPause:
        step = self.definition.step_as(instruction.step_id, MonitorStep)
        monitor = self.state.monitor
        if monitor is None or monitor.step_id != step.id:
            deadline = self.now + timedelta(seconds=step.deadline_seconds) if step.deadline_seconds else None
            monitor = self.state.monitor = MonitorState(step_id=step.id, deadline_at=deadline)
        if monitor.sleeping_until is not None:
            return _MonitorPause(until=monitor.sleeping_until)
        self._current = _StepRun(
            op="agent" if step.agent else "function",
            step_id=step.id,
            key=f"{step.id}.{monitor.iteration}",
            seq=self._allocate(),
            iteration=monitor.iteration,
        )
        return self._current

    # ------------------------------------------------------------------------------------------------ step results

    def _on_result(self, result: StepResult) -> None:
        command = self._current
        if command is None or command.step_id != result.step_id:
            raise WorkflowDriverError(f"a result for step {result.step_id!r}, which is not running")
        self._current = None
        self._step_done()
        if result.status == "cancelled" or result.cancel_requested:
            self._finish("cancelled", CANCELLED_REASON)
            return
        if result.status == "failed":
            reason = f"step '{result.step_id}' failed: {result.error or 'unknown error'}"
            self._finish("failed", reason, failed_step=result.step_id, code=result.code)
            self._remember_resume_point(result.step_id)
            return
        if result.journaled:
            self.state.refs[result.step_id] = command.seq
            self.state.last_step = result.step_id
        instruction = self.program[self.state.pc]
        if instruction.op == "test":
            self.state.pc = self.state.pc + 1 if result.condition else instruction.branch_target()
        elif instruction.op == "monitor":
            self._after_check(self.definition.step_as(instruction.step_id, MonitorStep), result)
        elif instruction.op == "approval" and result.approved is False and self._rejection_fails(result.step_id):
            self._finish("failed", f"step '{result.step_id}' was rejected", failed_step=result.step_id)
            self._remember_resume_point(result.step_id)  # a rewind asks for the sign-off again
        else:
            self.state.pc += 1

    def _after_check(self, step: MonitorStep, result: StepResult) -> None:
        monitor = self.state.monitor
        if monitor is None or monitor.step_id != step.id:
            raise WorkflowDriverError(f"a check of monitor {step.id!r}, which is not running")
        if result.condition:
            self.state.monitor = None
            self.state.pc += 1
        elif monitor.deadline_at is not None and self.now >= monitor.deadline_at:
            self.state.monitor = None
            if step.on_deadline == "fail":
                reason = f"step '{step.id}' failed: its condition did not hold before the deadline"
                self._finish("failed", reason, failed_step=step.id)
            else:
                self.state.pc += 1
        else:
            monitor.iteration += 1
            wake = self.now + timedelta(seconds=step.every_seconds)
            monitor.sleeping_until = min(wake, monitor.deadline_at) if monitor.deadline_at else wake

    def _on_slept(self) -> None:
        if self.state.monitor is not None:
            self.state.monitor.sleeping_until = None
        self._step_done()

    def _remember_resume_point(self, step_id: str) -> None:
        """The step at the program counter failed: a rewind runs it again (the steps before it keep their results;
        the new attempt has keys of its own), in a new execution that goes on from here."""
        attempts = {**self.state.attempts, step_id: self.state.attempts.get(step_id, 0) + 1}
        state = self.state.model_copy(
            update={"attempts": attempts, "generation": self.state.generation + 1, "monitor": None}, deep=True
        )
        self._resume_point = WorkflowInput(ref=self.ref, state=state)

    def _cancel(self) -> None:
        self._current = None
        self._finish("cancelled", CANCELLED_REASON)

    def _failure(self, failure: Failed) -> Done:
        return Done(status="failed", reason=failure.message, failed_step=self.active_step, code=failure.code)

    def _fail(self, failure: Failed) -> Done:
        """The orchestration itself cannot go on (e.g. a payload outgrew the budget): end it failed."""
        self._done = self._failure(failure)
        self._current = None
        self._child_runs = []
        self._waiting = None
        return self._done

    def _finish(
        self, status: FinalStatus, reason: str, failed_step: str | None = None, code: str | None = None
    ) -> Done:
        self._done = Done(status=status, reason=reason, failed_step=failed_step, code=code)
        return self._done

    def _finish_request(self, done: Done) -> FinishRequest:
        """What `workflow_finish` needs: the step references only when it resolves the output (completed)."""
        return FinishRequest(
            ref=self.ref,
            status=done.status,
            reason=done.reason,
            code=done.code,
            failed_step=done.failed_step,
            refs=dict(self.state.refs) if done.status == "completed" else {},
            last_step=self.state.last_step,
        )

    # ------------------------------------------------------------------------------------------------ steps

    def _run_step(self, command: _StepRun) -> Flow:
        """Run the step; a request that failed for good (an activity after its retries, a payload over the budget)
        fails the step with the failure's stable code and safe message."""
        try:
            return (yield from self._flows()[command.op](command))
        except _StepFailed as failed:
            self._resume()
            self._child_runs = []
            failure = failed.failure
            return StepResult(
                step_id=command.step_id, status="failed", code=failure.code, error=failure.message, journaled=False
            )

    def _flows(self) -> dict[Op, Callable[[_StepRun], Flow]]:
        return {
            "agent": self._agents,
            "parallel": self._agents,
            "function": self._function,
            "test": self._test,
            "delay": self._delay,
            "signal": self._signal,
            "approval": self._approval,
        }

    def _agents(self, command: _StepRun) -> Flow:
        awaiting = self.state.awaiting
        if awaiting is not None:  # the execution before waited for a rewound child: look again at once
            self.state.awaiting = None
            self._child_runs = awaiting.run_ids
            record = self._request(
                command, AgentRunsRecord, run_ids=awaiting.run_ids, failure=awaiting.failure,
                cancelled=awaiting.cancelled,
            )
            result = yield from self._call(workflow_record_agents, record)
            return (yield from self._await_rewound(command, record, result, awaiting.looks))
        started = yield from self._call(workflow_start_agents, self._request(command, StepRequest))
        self._unless_closed(started.ended)
        if started.cancelled:
            return None
        if started.error:
            return StepResult(step_id=command.step_id, status="failed", error=started.error, journaled=False)
        run_ids = started.run_ids
        self._child_runs = run_ids
        ended = (
            _expect((yield RunChildRuns(runs=started.runs, fail_fast=self._fails_fast(command))), ChildRunsEnded,
                    Cancelled)
            if started.runs
            else ChildRunsEnded()  # all closed by the store: nothing to run, their records say why the step fails
        )
        if isinstance(ended, Cancelled):
            return (yield from self._cancel_children(run_ids))
        if ended.running:  # a branch failed: the others are cancelled, and the step fails once they ended
            yield from self._keep_cancelling(workflow_cancel_children, ended.running)
            _expect((yield DrainChildRuns()), ChildRunsDrained)
        failure = f"a child run crashed: {ended.crash}" if ended.crash else None
        record = self._request(command, AgentRunsRecord, run_ids=run_ids, failure=failure, cancelled=ended.running)
        result = yield from self._call(workflow_record_agents, record)
        return (yield from self._await_rewound(command, record, result, 0))

    def _await_rewound(self, command: _StepRun, record: AgentRunsRecord, result: StepResult, looks: int) -> Flow:
        """While a child rewound on its own (`POST /api/runs/{child}/rewind`) runs (the look said `running`), look
        again: it goes on in an orchestration this step did not start, so nothing tells the step when that ends.
        Workflows started with `looks_continue` continue as new every `LOOKS_PER_EXECUTION` looks (the step, its
        children and its looks carried in `WorkflowState.awaiting`), and take a cancel flagged in the store (its
        event may have been dropped by a continue-as-new)."""
        run_ids = record.run_ids
        for look in itertools.count(looks):
            if result.status != "running":
                break
            if self.ref.looks_continue and result.cancel_requested:
                return (yield from self._cancel_children(run_ids))
            delay = REWOUND_CHILD_LOOKS[min(look, len(REWOUND_CHILD_LOOKS) - 1)]
            if isinstance(_expect((yield Sleep(until=self.now + delay)), TimerFired, Cancelled), Cancelled):
                return (yield from self._cancel_children(run_ids))
            if self.ref.looks_continue and look + 1 - looks >= LOOKS_PER_EXECUTION:
                yield self._continue_awaiting(command, record, look + 1)
                return None  # not reached: the orchestrator has returned
            result = yield from self._call(workflow_record_agents, record)
        self._child_runs = []
        return result

    def _continue_awaiting(self, command: _StepRun, record: AgentRunsRecord, looks: int) -> ContinueAsNew:
        awaiting = AwaitedChildren(
            op=command.op, step_id=command.step_id, key=command.key, seq=command.seq, iteration=command.iteration,
            run_ids=record.run_ids, failure=record.failure, cancelled=record.cancelled, looks=looks,
        )
        state = self.state.model_copy(update={"generation": self.state.generation + 1, "awaiting": awaiting})
        return ContinueAsNew(input=WorkflowInput(ref=self.ref, state=state))

    def _fails_fast(self, command: _StepRun) -> bool:
        """Whether the step stops at its first failed branch: a parallel step's default, in workflows started since."""
        step = self.definition.step(command.step_id)
        return self.ref.fails_fast and isinstance(step, ParallelStep) and step.on_branch_failure == "cancel_others"

    def _cancel_children(self, run_ids: list[str]) -> Generator[Request, Event, None]:
        """The workflow was cancelled while its step's child runs worked: cancel them (flagged, then their cancel
        event), and let them end."""
        self._wait("cancelling", None)
        yield from self._keep_cancelling(workflow_flag_children_cancelled, run_ids)
        _expect((yield DrainChildRuns()), ChildRunsDrained)
        self._child_runs = []

    def _keep_cancelling(
        self, cancel: Activity[ChildRunIds, NoResult], run_ids: list[str]
    ) -> Generator[Request, Event, None]:
        """Cancel child runs, trying again where that fails for good (`_keep_trying`), then giving up and letting
        them end on their own: failing the step instead would leave them running, unattended, a child waiting for a
        person for as long as its approval may take (a poll of the cancelling workflow cancels them then)."""
        try:
            yield from self._keep_trying(cancel, ChildRunIds(run_ids=run_ids))
        except _StepFailed:
            if not self.ref.outlasts_store_outages:
                raise

    def _keep_trying(
        self, activity: Activity[InputT, OutputT], step_input: InputT
    ) -> Generator[Request, Event, OutputT]:
        """For the steps that must not be left half done (the close, a cancel of children): the activity tried
        again after each wait of `OUTAGE_RETRIES` while it fails for good because the store is down (workflows started
        with `outlasts_store_outages`)."""
        return (yield from self._trying(activity, step_input, self.ref.outlasts_store_outages))

    def _call(self, activity: Activity[InputT, OutputT], step_input: InputT) -> Generator[Request, Event, OutputT]:
        """An activity of a step: tried again like `_keep_trying` in workflows started since every step outlasts a
        store outage (`steps_outlast_store_outages`); before, its failure failed the step."""
        return (yield from self._trying(activity, step_input, self.ref.steps_outlast_store_outages))

    def _trying(
        self, activity: Activity[InputT, OutputT], step_input: InputT, outlasts_outages: bool
    ) -> Generator[Request, Event, OutputT]:
        """The activity, tried again after each wait of `OUTAGE_RETRIES` (`outlasts_outages`) while it fails for
        good because the store is down. Any other failure - a bug, a payload over the budget - fails the same way
        every time: raised at once, not an hour later. The waits are pauses, not raced with cancel, as the workflow's
        activities are not: a cancel is taken at the step's next wait or before the next step."""
        for wait in OUTAGE_RETRIES if outlasts_outages else ():
            try:
                return (yield from self._once(activity, step_input))
            except _StepFailed as failed:
                if not failed.failure.outage:
                    raise
            _expect((yield Pause(until=self.now + wait)), TimerFired)
        return (yield from self._once(activity, step_input))

    def _function(self, command: _StepRun) -> Flow:
        result = yield from self._call(workflow_call_function, self._request(command, StepRequest))
        self._unless_closed(result.ended)
        return result

    def _test(self, command: _StepRun) -> Flow:
        return (yield from self._call(workflow_evaluate, self._request(command, StepRequest)))

    def _delay(self, command: _StepRun) -> Flow:
        step = self.definition.step_as(command.step_id, DelayStep)
        if step.until is not None:
            until = yield from self._call(workflow_resolve_time, self._request(command, StepRequest))
        else:
            until = self.now + timedelta(seconds=step.seconds or 0)
        if (yield from self._sleep(until)):
            return None
        return (yield from self._call(workflow_record_delay, self._request(command, DelayRecord, until=until)))

    def _signal(self, command: _StepRun) -> Flow:
        """Consume the next signal of the step's name, or time out, or be cancelled. Signals are queues per name in
        the store (the API appends, then rings): signal `index` is consumed when its event rings, or when the
        following signal's does (then this one's ring was lost), or when the store already holds it (a ring dropped
        by continue-as-new, or one that came before this execution)."""
        step = self.definition.step_as(command.step_id, SignalStep)
        index = self.state.signals.get(step.name, 1)
        events = [signal_event(step.name, index), signal_event(step.name, index + 1)]
        arrived = isinstance(_expect((yield CheckSignal(events=events)), Rang, Silent), Rang)
        if not arrived:
            probe = SignalProbe(ref=self.ref, name=step.name, index=index)
            arrived = (yield from self._call(workflow_find_signal, probe)).found
        if not arrived:
            timeout = step.timeout_seconds
            until = self.now + timedelta(seconds=timeout) if timeout is not None else None
            self._wait("waiting", Waiting(signal=step.name, signal_index=index))
            ended = _expect((yield WaitForSignal(events=events, until=until)), Rang, TimerFired, Cancelled)
            self._resume()
            if isinstance(ended, Cancelled):
                return None
            arrived = isinstance(ended, Rang)
        record = self._request(command, SignalRecord, name=step.name, index=index if arrived else None)
        result = yield from self._call(workflow_record_signal, record)
        if arrived:
            self.state.signals[step.name] = index + 1  # consumed: exactly once, whatever rings later
        return result

    def _approval(self, command: _StepRun) -> Flow:
        """Open the gate, wait for a decision until its deadline; at the deadline, escalate once if the step says
        so, else expire it; then record the outcome."""
        step = self.definition.step_as(command.step_id, ApprovalStep)
        level, timeout = 0, step.timeout_seconds
        while True:
            expires_at = self.now + timedelta(seconds=timeout)
            gate = self._request(command, GateRequest, level=level, expires_at=expires_at)
            opened = yield from self._call(workflow_open_gate, gate)
            self._unless_closed(opened.ended)
            self._wait("requires_action", Waiting(approval_id=opened.approval_id, until=opened.expires_at))
            wait = WaitForDecision(event=approval_event_name(opened.approval_id), until=opened.expires_at)
            ended = _expect((yield wait), Rang, TimerFired, Cancelled)
            self._resume()
            if isinstance(ended, Cancelled):
                return None
            expired = False
            if isinstance(ended, TimerFired):
                # The store decides: a decision stored before the expiry (its ring still on the way) wins.
                pending = self._request(command, GateRecord, approval_id=opened.approval_id, level=level)
                expired = (yield from self._call(workflow_expire_gate, pending)).status == "expired"
                if (yield from self._cancelled_while_recorded()):
                    return None
            if not expired or not isinstance(step.on_timeout, Escalate) or level > 0:
                break
            level, timeout = 1, step.on_timeout.timeout_seconds
        record = self._request(command, GateRecord, approval_id=opened.approval_id, level=level, timed_out=expired)
        recorded = yield from self._call(workflow_record_gate, record)
        return None if (yield from self._cancelled_while_recorded()) else recorded

    def _cancelled_while_recorded(self) -> Generator[Request, Event, bool]:
        """Whether a cancel won the wait of the gate's failing recording just made (`notifications.hooks`), which
        gave its events up for it: taken before the gate's outcome goes on (an escalation, the next step, the end).
        Only workflows whose recordings race cancel (the flag): histories from before took the outcome's course."""
        if not self.ref.notify_gives_up:
            return False
        return isinstance(_expect((yield TakeCancel()), Cancelled, Silent), Cancelled)

    def _sleep(self, until: datetime) -> Generator[Request, Event, bool]:
        """Wait until a time (a delay, a monitor's pause); True when cancelled meanwhile."""
        self._wait("waiting", Waiting(until=until))
        ended = _expect((yield Sleep(until=until)), TimerFired, Cancelled)
        self._resume()
        return isinstance(ended, Cancelled)

    def _once(self, activity: Activity[InputT, OutputT], step_input: InputT) -> Generator[Request, Event, OutputT]:
        completed = _expect((yield CallActivity(activity=activity, input=step_input)), ActivityCompleted)
        return cast(OutputT, completed.output)  # validated into the activity's output type by the orchestrator

    def _request(self, command: _StepRun, model: type[RecordT], **fields: Any) -> RecordT:
        """A step activity's input: which step, which attempt (`key`), where to journal, what it may read."""
        return model(
            ref=self.ref,
            step_id=command.step_id,
            key=command.key,
            seq=command.seq,
            refs=dict(self.state.refs),
            at=self.now,
            **fields,
        )

    def _wait(self, status: WorkflowStatus, waiting: Waiting | None) -> None:
        self._status = status
        self._waiting = waiting

    def _resume(self) -> None:
        self._wait("in_progress", None)

    # ------------------------------------------------------------------------------------------------ state

    @property
    def now(self) -> datetime:
        if self._now is None:
            raise WorkflowDriverError("start the driver first")
        return self._now

    def progress(self) -> WorkflowProgress:
        current = self._current
        done = self._done
        step_id = current.step_id if current else (self.state.monitor.step_id if self.state.monitor else None)
        return WorkflowProgress(
            status=self._status,
            active_step=None if done else step_id,
            active_kind=None if done or step_id is None else self._kind(step_id),
            iteration=self.state.monitor.iteration if self.state.monitor and not done else None,
            child_runs=list(self._child_runs),
            waiting=self._waiting,
            steps_done=self.state.steps_done,
            generation=self.state.generation,
            reason=done.reason if done else None,
            failed_step=done.failed_step if done else None,
        )

    def _kind(self, step_id: str) -> str:
        return getattr(self.definition.step(step_id), "kind", "step")

    def _rejection_fails(self, step_id: str) -> bool:
        step = self.definition.step(step_id)
        return isinstance(step, ApprovalStep) and step.on_reject == "fail"

    @property
    def notify_seq(self) -> int:
        """The seq of the next position: deterministic and never smaller than before (it orders the notifications)."""
        return seq_for(CONTROL_ORDINAL, self.state.next_position)

    def _allocate(self) -> int:
        seq = seq_for(CONTROL_ORDINAL, self.state.next_position)
        self.state.next_position += 1
        return seq

    def _step_done(self) -> None:
        self._executed += 1
        self.state.steps_done += 1


def _expect(event: Event, *kinds: type[Any]) -> Any:
    """The event, if it is one the request can end with (else the orchestrator has a bug)."""
    if not isinstance(event, kinds):
        expected = " or ".join(kind.__name__ for kind in kinds)
        raise WorkflowDriverError(f"expected {expected}, got {type(event).__name__}")
    return event


def _code_of(ended: FinishResult) -> str | None:
    """The stable code of a workflow that ended as its record says (None when it completed)."""
    return None if ended.status == "completed" else error_of(ended.status, ended.reason)["code"]
