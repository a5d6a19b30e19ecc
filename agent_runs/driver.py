"""`RunDriver`: the agent loop plus the bookkeeping of a durable run, with no I/O (the orchestrator's brain).

The orchestrator asks the driver what to do, turns the answer into durable tasks and feeds the results back. The
driver hands out message positions (so every write has a deterministic seq), tracks which approvals are pending,
knows what pollers may see (`visible_seq`: everything written by steps that have completed) and when the execution
should continue as new. Keeping this pure makes the orchestrator a thin adapter and lets the rules be unit-tested
without a host.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic_core import to_json

from agent_runs.contracts import (
    ApprovalRequestsInput,
    ClosedModelTurn,
    CloseIfFinal,
    DecisionsInput,
    DecisionsResult,
    EscalateApprovalsInput,
    ExpireApprovalsInput,
    FinishInput,
    FinishResult,
    MiddlewareBeforeInput,
    MiddlewareBeforeResult,
    ModelCallInput,
    ResumePoint,
    RunInput,
    RunMiddlewarePhase,
    RunOutcome,
    RunProgress,
    RunStatus,
    StepFailure,
    ToolCallInput,
)
from agent_runs.sequence import SLOTS_PER_MODEL_CALL, seq_for
from agent_runtime.conversation import approval_id as approval_id_for
from agent_runtime.loop import AgentLoop
from agent_runtime.loop_types import (
    ApprovalDecision,
    ApprovalTimeout,
    CallModel,
    Cancel,
    Fail,
    Finish,
    LoopCommand,
    LoopState,
    ModelTurn,
    RequestApproval,
    RunTools,
    ToolOutcome,
    ToolResults,
)
from notifications.contracts import NotificationFlags

ResumeStep = Literal["call_model", "invoke_tool", "discover_tools", "run_middleware_before"]

# Model calls per execution before continuing as new: bounds the history each episode replays.
MODEL_CALLS_PER_EXECUTION = 8
FINISH_SPARE_SLOTS = 10_000
# Positions for what run middleware writes before the run starts: input it adds, or the answer it ends the run with.
MIDDLEWARE_SLOTS = 16


class RunDriver:
    def __init__(self, run_input: RunInput) -> None:
        self._input = run_input
        self.run = run_input.run
        self._position = run_input.next_position
        self._visible_position = run_input.next_position
        self._loop = AgentLoop(state=run_input.loop_state) if run_input.loop_state else AgentLoop(run_input.loop_config)
        self._status: RunStatus = "in_progress"
        self._model_calls = 0
        self._pending_approvals: list[str] = []
        self._expires_at: datetime | None = None
        # An escalation's new deadline, published once the escalation is stored (`on_deadline_step`), not before: a
        # stream or poll that read the progress in between would read the approvals as they were, and nothing would
        # change in the progress afterwards to make it read them again.
        self._escalated_expires_at: datetime | None = None
        self._reason: str | None = None
        self._model_call_seq: int | None = None
        self._handed_on: set[str] = set()
        self._escalated = False
        self._approvals_asked = False
        # A continued-as-new execution only exists if the middleware's pre-processing let the run proceed.
        self._middleware: RunMiddlewarePhase = "after" if run_input.generation > 0 else "none"
        # The step in flight that a rewind could execute again, and where the run would go on from if it fails.
        self._repeatable: tuple[ResumeStep, LoopCommand | None] | None = None
        self._resume_from: tuple[ResumeStep, LoopState | None, LoopCommand | None] | None = None
        self._closed_by_step: FinishResult | None = None

    # ------------------------------------------------------------------------------------------------ commands

    def first_command(self) -> LoopCommand:
        return self._input.pending_command or self._loop.start()

    # ------------------------------------------------------------------------------------------------ run middleware

    def needs_middleware_before(self) -> bool:
        """The run middleware's pre-processing runs once, before the first step of a fresh run."""
        fresh = self._input.generation == 0 and self._input.loop_state is None and self._input.pending_command is None
        return self._input.run_middleware and fresh and self._middleware == "none"

    def middleware_before_input(self) -> MiddlewareBeforeInput:
        self._repeatable = ("run_middleware_before", None)  # its effects are recorded once: the run starts afresh
        return MiddlewareBeforeInput(run=self.run, first_seq=self._allocate(MIDDLEWARE_SLOTS), slots=MIDDLEWARE_SLOTS)

    def on_middleware_before(self, result: MiddlewareBeforeResult) -> LoopCommand:
        """Start the loop, or finish as the middleware decided (it already wrote any answer)."""
        self._step_completed()
        if result.proceed:
            self._middleware = "after"
            return self.first_command()
        self._middleware = "ended"
        return Finish(status=result.status, reason=result.reason)  # before any step: nothing is unresolved

    def should_continue_as_new(self, command: LoopCommand) -> bool:
        return isinstance(command, CallModel) and self._model_calls >= MODEL_CALLS_PER_EXECUTION

    def continue_as_new_input(self, command: LoopCommand) -> RunInput:
        return self._input.model_copy(
            update={
                "next_position": self._position,
                "loop_state": self._loop.state,
                "pending_command": command,
                "generation": self._input.generation + 1,
            }
        )

    def discovery_started(self) -> None:
        """The MCP tools are being listed (first step of a fresh run): a failure restarts the run."""
        self._repeatable = ("discover_tools", None)

    def model_call(self, command: CallModel) -> ModelCallInput:
        self._repeatable = ("call_model", command)
        self._model_calls += 1
        self._model_call_seq = self._allocate(SLOTS_PER_MODEL_CALL)
        # Should the answer end the loop, the call closes the run in the finish block `finish_input` would allocate
        # next (nothing is allocated between a model call and the finish that follows it). Not with run middleware:
        # its post-processing runs once (recorded), and a call redelivered before its close asks the model again, so
        # a recorded post-processing could belong to another answer; `finish_run` post-processes the stored one.
        close = None
        if not self._input.run_middleware:
            close = CloseIfFinal(
                loop_state=self._loop.state,
                first_seq=seq_for(self.run.ordinal, self._position),
                approvals_asked=self._approvals_asked or bool(self._pending_approvals),
            )
        return ModelCallInput(run=self.run, command=command, first_seq=self._model_call_seq, close=close)

    def tool_calls(self, command: RunTools) -> list[ToolCallInput]:
        self._repeatable = ("invoke_tool", command)
        return [ToolCallInput(run=self.run, invocation=call, seq=self._allocate(1)) for call in command.calls]

    def approval_requests(self, command: RequestApproval, now: datetime) -> ApprovalRequestsInput:
        self._expires_at = now + timedelta(seconds=self._input.approval_timeout_seconds)
        self._pending_approvals = [approval_id_for(self.run.run_id, ref.call_id) for ref in command.calls]
        self._escalated = False
        self._approvals_asked = True
        return ApprovalRequestsInput(
            run=self.run, calls=command.calls, first_seq=self._allocate(len(command.calls)), expires_at=self._expires_at
        )

    def decisions_input(self, rung: list[str]) -> DecisionsInput:
        """The activity input applying whatever the store holds for the pending approvals (`rung` rang)."""
        pending = self.pending_approvals
        return DecisionsInput(run=self.run, approval_ids=pending, rung=rung, first_seq=self._allocate(len(pending)))

    def escalation_input(self, now: datetime) -> EscalateApprovalsInput | None:
        """At the first deadline of an escalating agent: the step handing the pending approvals on, with the new
        deadline; None when there is nobody (left) to escalate to."""
        escalation = self._input.escalation
        if escalation is None or self._escalated:
            return None
        self._escalated = True
        self._escalated_expires_at = now + timedelta(seconds=escalation.timeout_seconds)
        return EscalateApprovalsInput(
            run=self.run, approval_ids=self.pending_approvals, to=escalation.to, expires_at=self._escalated_expires_at
        )

    def expire_input(self) -> ExpireApprovalsInput:
        return ExpireApprovalsInput(
            run=self.run,
            approval_ids=list(self._pending_approvals),
            first_seq=self._allocate(len(self._pending_approvals)),
        )

    def finish_input(self, finish: Finish) -> FinishInput:
        # The store may hold calls the loop never saw (a stored answer whose summary could not be handed back): the
        # last step reserves room to close them all. Positions are plentiful and gaps are fine.
        slots = len(finish.unresolved) + 1 + FINISH_SPARE_SLOTS
        phase = self._middleware if self._input.run_middleware else "none"
        return FinishInput(
            run=self.run,
            finish=finish,
            first_seq=self._allocate(slots),
            usage=self._loop.state.usage,
            run_middleware=phase,
            approvals_asked=self._approvals_asked or bool(self._pending_approvals),
        )

    # ------------------------------------------------------------------------------------------------ results

    def on_model_result(self, result: ModelTurn | StepFailure | ClosedModelTurn) -> LoopCommand:
        if isinstance(result, ClosedModelTurn):
            return self._on_closed_turn(result)
        failed_for_good = isinstance(result, StepFailure) and not result.is_cancel
        if failed_for_good:  # e.g. the endpoint refused the request: a rewind asks again once it is fixed
            self._remember_resume_point()
        shown, drafted = self._visible_position, self._model_call_seq
        self._step_completed()
        if isinstance(result, StepFailure) and result.is_cancel:
            return self._loop.send(Cancel())
        if isinstance(result, StepFailure):
            return self._loop.send(Fail(reason=f"{result.code}: {result.message}"))
        command = self._loop.send(result)
        if isinstance(command, RequestApproval):
            # The answer shows with its approval requests (`on_approvals_recorded`), never before them: read while
            # the requests are being recorded, its calls would look under way (a Responses stream would announce
            # them as running `mcp_call` items, then replace them with the requests). Meanwhile its text stays what
            # pollers see as the draft (`partial_output`): stored in the draft's place, it does not flicker away.
            self._visible_position, self._model_call_seq = shown, drafted
        return command

    def _on_closed_turn(self, closed: ClosedModelTurn) -> Finish:
        """The model call closed the run (its answer ended the loop): the loop's finish is the run's, and its block
        is allocated as if `finish_run` had been scheduled with it."""
        self._step_completed()
        # The same pure loop decides here what it decided in the activity, from the same state and answer.
        command = self._loop.send(closed.turn) if closed.turn is not None else closed.finish
        if not isinstance(command, Finish):  # a loop changed between the two (a deployment): the store has it closed
            finished = closed.finished
            command = Finish(status=finished.status, reason=finished.reason, usage=self._loop.state.usage)
        self.finish_input(command)
        self._closed_by_step = closed.finished
        return command

    @property
    def closed_by_step(self) -> FinishResult | None:
        """How the run ended when a step already closed it (no `finish_run` to schedule)."""
        return self._closed_by_step

    def on_approvals_recorded(self) -> None:
        """The approval requests are stored: pollers may see them while the run waits."""
        self._step_completed()
        self._status = "requires_action"

    def on_tool_results(self, outcomes: list[ToolOutcome]) -> LoopCommand:
        self._step_completed()
        return self._loop.send(ToolResults(outcomes=outcomes))

    def on_decisions(self, result: DecisionsResult) -> LoopCommand | None:
        """Feed the applied decisions to the loop; None if none applied (still waiting for the same approvals)."""
        command: LoopCommand | None = None
        for decision in result.decided:
            command = self.on_decision(decision) or command
        self._step_completed()
        return command

    def on_decision(self, decision: ApprovalDecision) -> LoopCommand | None:
        """One decision; None for a call not (or no longer) pending here (delivered twice: applied once)."""
        decided = approval_id_for(self.run.run_id, decision.call_id)
        if decided not in self._pending_approvals:
            return None
        self._step_completed()
        self._pending_approvals = [pending for pending in self._pending_approvals if pending != decided]
        command = self._loop.send(decision)
        self._after_approvals()
        return command

    def on_deadline_step(self, handed_on: list[str]) -> None:
        """A deadline step (expiry or escalation) stored what it did to `handed_on`; the other pending approvals
        were decided in the store meanwhile and stay pending here until applied (`decided_during_deadline`)."""
        self._step_completed()
        self._handed_on = set(handed_on)
        if self._escalated_expires_at is not None:  # the escalation is stored: its deadline is now the one
            self._expires_at, self._escalated_expires_at = self._escalated_expires_at, None

    @property
    def decided_during_deadline(self) -> list[str]:
        return [a for a in self._pending_approvals if a not in self._handed_on]

    def on_timeout(self) -> LoopCommand | None:
        """The deadline passed and every decision that won it is applied: the rest time out."""
        command: LoopCommand | None = None
        if self._loop.awaiting_approval:
            self._pending_approvals = []
            command = self._loop.send(ApprovalTimeout())
        self._handed_on = set()
        self._after_approvals()
        return command

    def on_failure(self, reason: str, *, repeatable: bool = True) -> LoopCommand:
        """An activity failed after its retries: the run fails with the reason. `repeatable=False`: the step found
        the run closed before it (given up by its start): nothing for a rewind to repeat."""
        if repeatable:
            self._remember_resume_point()
        self._step_completed()
        return self._loop.send(Fail(reason=reason))

    def _remember_resume_point(self) -> None:
        """The step in flight failed: keep the loop's state from before its result (the loop has received nothing
        since it asked for the step), so a rewind executes exactly this step again. Approval steps are not
        repeatable: a failed run has expired its pending approvals."""
        if self._repeatable is None:
            return
        step, command = self._repeatable
        state = self._loop.state.model_copy(deep=True) if command is not None else None
        self._resume_from = (step, state, command)

    def resume_point(self) -> ResumePoint | None:
        """After `finish_input` (its positions are taken): the input that goes on from the failed step, or None if
        the run did not fail in a repeatable step. Positions continue after everything the run wrote."""
        if self._resume_from is None or self._status != "failed":
            return None
        step, state, command = self._resume_from
        if command is None:  # failed before the loop started: the run starts again, from the first step
            update = {"next_position": self._position, "queued": False}
        else:
            update = {
                "next_position": self._position,
                "loop_state": state,
                "pending_command": command,
                "generation": self._input.generation + 1,
                "queued": False,
            }
        iteration = state.iteration if state is not None else 0
        return ResumePoint(step=step, iteration=iteration, input=self._input.model_copy(update=update))

    def on_cancel(self, reason: str | None) -> LoopCommand:
        return self._loop.send(Cancel(reason=reason))

    def on_finished(self, finish: Finish, result: FinishResult | None = None) -> RunOutcome:
        """`result`: what `finish_run` decided (older histories returned nothing: the loop's verdict stands)."""
        self._step_completed()
        status, reason = (result.status, result.reason) if result is not None else (finish.status, finish.reason)
        self._status = status
        self._reason = reason
        self._pending_approvals = []
        return RunOutcome(run_id=self.run.run_id, status=status, reason=reason)

    # ------------------------------------------------------------------------------------------------ state

    @property
    def notifications(self) -> NotificationFlags:
        return self._input

    @property
    def notify_gives_up(self) -> bool:
        return self._input.notify_gives_up

    @property
    def ring_workflow(self) -> str | None:
        return self._input.ring_workflow

    @property
    def notify_seq(self) -> int | None:
        """The seq of the run's next position: deterministic and never smaller than before, across continue-as-new
        and rewinds (positions go on after everything written), so it orders the run's notifications."""
        return seq_for(self.run.ordinal, self._position) if self.run.ordinal >= 1 else None

    @property
    def cancel_grace_seconds(self) -> float:
        return self._input.cancel_grace_seconds

    @property
    def steps_wait_out_outages(self) -> bool:
        return self._input.steps_wait_out_outages

    @property
    def pending_approvals(self) -> list[str]:
        return list(self._pending_approvals)

    @property
    def approvals_expire_at(self) -> datetime | None:
        return self._expires_at

    def progress(self) -> RunProgress:
        return RunProgress(**self._progress_fields())

    def progress_key(self) -> bytes:
        """What `progress()` is built from, as JSON (pydantic's own serializers): equal keys build equal progress, so
        the custom status of a replayed step is found by its key without building it again."""
        return to_json(self._progress_fields())

    def _progress_fields(self) -> dict[str, Any]:
        state = self._loop.state
        return {
            "status": self._status,
            "iteration": state.iteration,
            "visible_seq": seq_for(self.run.ordinal, self._visible_position) - 1,
            "pending_approvals": self._pending_approvals,
            "approvals_expire_at": self._expires_at if self._pending_approvals else None,
            "usage": state.usage,
            "reason": self._reason,
            "model_call_seq": self._model_call_seq,
        }

    def _allocate(self, count: int) -> int:
        first = seq_for(self.run.ordinal, self._position)
        self._position += count
        return first

    def _step_completed(self) -> None:
        # Nothing is in flight when a result is fed back, so everything allocated so far has been written.
        self._visible_position = self._position
        self._model_call_seq = None
        self._repeatable = None

    def _after_approvals(self) -> None:
        if not self._loop.awaiting_approval:
            self._pending_approvals = []
            self._status = "in_progress"
