"""`WorkflowDriver`: the control flow of a workflow run, with no I/O (the workflow orchestrator's brain).

The orchestrator asks for the next command, runs it as durable tasks (activities, child runs, timers, events) and
feeds the step's result back. The driver moves the program counter (branches, monitors, approvals rejected),
hands out journal seqs, keeps the references to step outputs, decides when to continue as new, and says what
pollers see (`progress`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict

from agent_runs.sequence import seq_for
from workflow_runtime.contracts import (
    FinalStatus,
    FinishRequest,
    MonitorState,
    StepResult,
    Waiting,
    WorkflowInput,
    WorkflowOutcome,
    WorkflowProgress,
    WorkflowStatus,
)
from workflow_runtime.definition import ApprovalStep, MonitorStep, WorkflowDefinition
from workflow_runtime.program import Instruction, Op, compile_program

# Steps (and monitor sleeps) per execution before continuing as new: keeps each episode's replay short, so an
# eternal monitor runs for ever at a flat cost.
STEPS_PER_EXECUTION = 24
CONTROL_ORDINAL = 1  # the workflow's run record is the first (and only) run of its control session


class _Command(BaseModel):
    model_config = ConfigDict(frozen=True)


class ExecuteStep(_Command):
    kind: Literal["execute"] = "execute"
    op: Op
    step_id: str
    key: str
    seq: int
    iteration: int | None = None


class Sleep(_Command):
    kind: Literal["sleep"] = "sleep"
    step_id: str
    until: datetime


class ContinueAsNew(_Command):
    kind: Literal["continue_as_new"] = "continue_as_new"
    input: WorkflowInput


class Done(_Command):
    kind: Literal["done"] = "done"
    status: FinalStatus
    reason: str
    failed_step: str | None = None
    code: str | None = None  # a failure's stable code (None: `step_failed` when a step failed, else the status)


Command = ExecuteStep | Sleep | ContinueAsNew | Done


class WorkflowDriver:
    def __init__(self, definition: WorkflowDefinition, workflow_input: WorkflowInput) -> None:
        self.definition = definition
        self.ref = workflow_input.ref
        self.state = workflow_input.state.model_copy(deep=True)
        self.program: list[Instruction] = compile_program(definition)
        self._executed = 0
        self._current: ExecuteStep | None = None
        self._done: Done | None = None
        self.status: WorkflowStatus = "in_progress"
        self.waiting: Waiting | None = None
        self.child_runs: list[str] = []

    # ------------------------------------------------------------------------------------------------ commands

    def next_command(self, now: datetime) -> Command:
        if self._done is not None:
            return self._done
        while self.state.pc < len(self.program) and self.program[self.state.pc].op == "jump":
            self.state.pc = self.program[self.state.pc].branch_target()
        if self.state.pc >= len(self.program):
            return self._finish("completed", "all steps completed")
        if self._executed >= STEPS_PER_EXECUTION:
            return ContinueAsNew(
                input=WorkflowInput(
                    ref=self.ref, state=self.state.model_copy(update={"generation": self.state.generation + 1})
                )
            )
        instruction = self.program[self.state.pc]
        if instruction.op == "monitor":
            return self._monitor_command(instruction, now)
        self._current = ExecuteStep(
            op=instruction.op, step_id=instruction.step_id, key=instruction.step_id, seq=self._allocate()
        )
        return self._current

    def _monitor_command(self, instruction: Instruction, now: datetime) -> Command:
        step = self._monitor(instruction.step_id)
        monitor = self.state.monitor
        if monitor is None or monitor.step_id != step.id:
            deadline = now + timedelta(seconds=step.deadline_seconds) if step.deadline_seconds else None
            monitor = self.state.monitor = MonitorState(step_id=step.id, deadline_at=deadline)
        if monitor.sleeping_until is not None:
            return Sleep(step_id=step.id, until=monitor.sleeping_until)
        self._current = ExecuteStep(
            op="agent" if step.agent else "function",
            step_id=step.id,
            key=f"{step.id}.{monitor.iteration}",
            seq=self._allocate(),
            iteration=monitor.iteration,
        )
        return self._current

    # ------------------------------------------------------------------------------------------------ results

    def on_result(self, result: StepResult, now: datetime) -> None:
        """Feed back the result of the current `ExecuteStep`."""
        command = self._current
        if command is None or command.step_id != result.step_id:
            raise ValueError(f"a result for step {result.step_id!r}, which is not running")
        self._current = None
        self._step_done()
        if result.status == "cancelled" or result.cancel_requested:
            self._finish("cancelled", "cancelled by the client")
            return
        if result.status == "failed":
            reason = f"step '{result.step_id}' failed: {result.error or 'unknown error'}"
            self._finish("failed", reason, failed_step=result.step_id, code=result.code)
            return
        if result.journaled:
            self.state.refs[result.step_id] = command.seq
            self.state.last_step = result.step_id
        instruction = self.program[self.state.pc]
        if instruction.op == "test":
            self.state.pc = self.state.pc + 1 if result.condition else instruction.branch_target()
        elif instruction.op == "monitor":
            self._after_check(self._monitor(instruction.step_id), result, now)
        elif instruction.op == "approval" and result.approved is False and self._rejection_fails(result.step_id):
            self._finish("failed", f"step '{result.step_id}' was rejected", failed_step=result.step_id)
        else:
            self.state.pc += 1

    def _after_check(self, step: MonitorStep, result: StepResult, now: datetime) -> None:
        monitor = self._running_monitor()
        if result.condition:
            self.state.monitor = None
            self.state.pc += 1
        elif monitor.deadline_at is not None and now >= monitor.deadline_at:
            self.state.monitor = None
            if step.on_deadline == "fail":
                reason = f"step '{step.id}' failed: its condition did not hold before the deadline"
                self._finish("failed", reason, failed_step=step.id)
            else:
                self.state.pc += 1
        else:
            monitor.iteration += 1
            wake = now + timedelta(seconds=step.every_seconds)
            monitor.sleeping_until = min(wake, monitor.deadline_at) if monitor.deadline_at else wake

    def on_slept(self) -> None:
        self._running_monitor().sleeping_until = None
        self._step_done()

    def on_cancel(self) -> Done:
        self._current = None
        return self._finish("cancelled", "cancelled by the client")

    def on_failure(self, code: str, reason: str) -> Done:
        """The orchestration itself cannot go on (e.g. its status outgrew the payload budget): end it failed."""
        step = self._current.step_id if self._current else None
        self._current = None
        self.child_runs = []
        self.waiting = None
        return self._finish("failed", reason, failed_step=step, code=code)

    def _finish(
        self, status: FinalStatus, reason: str, failed_step: str | None = None, code: str | None = None
    ) -> Done:
        self._done = Done(status=status, reason=reason, failed_step=failed_step, code=code)
        return self._done

    def finish_request(self, done: Done) -> FinishRequest:
        return FinishRequest(
            ref=self.ref,
            status=done.status,
            reason=done.reason,
            code=done.code,
            failed_step=done.failed_step,
            refs=dict(self.state.refs),
            last_step=self.state.last_step,
        )

    def outcome(self, done: Done) -> WorkflowOutcome:
        self.status = done.status
        return WorkflowOutcome(
            run_id=self.ref.run_id, status=done.status, reason=done.reason, failed_step=done.failed_step,
            code=done.code,
        )

    # ------------------------------------------------------------------------------------------------ state

    def progress(self) -> WorkflowProgress:
        current = self._current
        done = self._done
        step_id = current.step_id if current else (self.state.monitor.step_id if self.state.monitor else None)
        return WorkflowProgress(
            status=self.status,
            active_step=None if done else step_id,
            active_kind=None if done or step_id is None else self._kind(step_id),
            iteration=self.state.monitor.iteration if self.state.monitor and not done else None,
            child_runs=list(self.child_runs),
            waiting=self.waiting,
            steps_done=self.state.steps_done,
            generation=self.state.generation,
            reason=done.reason if done else None,
            failed_step=done.failed_step if done else None,
        )

    def _kind(self, step_id: str) -> str:
        return getattr(self.definition.step(step_id), "kind", "step")

    def _monitor(self, step_id: str) -> MonitorStep:
        step = self.definition.step(step_id)
        if not isinstance(step, MonitorStep):
            raise TypeError(f"step {step_id!r} is not a monitor")
        return step

    def _running_monitor(self) -> MonitorState:
        if self.state.monitor is None:
            raise ValueError("no monitor is running")
        return self.state.monitor

    def _rejection_fails(self, step_id: str) -> bool:
        step = self.definition.step(step_id)
        return isinstance(step, ApprovalStep) and step.on_reject == "fail"

    def _allocate(self) -> int:
        seq = seq_for(CONTROL_ORDINAL, self.state.next_position)
        self.state.next_position += 1
        return seq

    def _step_done(self) -> None:
        self._executed += 1
        self.state.steps_done += 1
