"""The agent loop as a pure state machine (seed 000's function-invocation loop, without the I/O).

    loop = AgentLoop(LoopConfig(max_iterations=40))
    command = loop.start()                      # CallModel
    command = loop.send(ModelTurn(...))         # RunTools | RequestApproval | Finish
    command = loop.send(ToolResults(...))       # CallModel | Finish
    ...

The machine never touches the network, the clock or randomness, so the durable orchestrator can keep it in replayed
memory and the in-process runner can drive the very same rules. Its `state` is a pydantic model: serialise it to
continue a long run as new.

Rules (seed 000 and its implementation):
- at most `max_iterations` model calls with tools; when the budget is spent, one final call with `tool_choice="none"`
  asks for a plain answer;
- a batch with any failed call counts as an error; `max_consecutive_errors` such batches in a row turn tools off
  (`tool_choice="none"`) for the rest of the run;
- calls to unknown tools get an error result (the model can correct itself), or end the run as failed when
  `terminate_on_unknown_calls` is set;
- `tool_choice` `required` or a named function: the run finishes right after the tools, without another model call;
- `MiddlewareTermination` in function middleware ends the run after the batch, without another model call;
- a `RunBudget` in the config is checked before every model call: once a limit is reached (model calls, total
  tokens, cost) the run ends `completed` with reason `budget_exceeded` instead of calling the model again;
- calls needing approval pause the batch (all of its calls wait, so the model sees every result together); decisions
  may arrive one by one (partial approval); rejected calls get a "denied" result with the reason, approved ones run
  (with edited arguments when the approver edited them).
"""

from __future__ import annotations

from .loop_types import (
    ApprovalDecision,
    ApprovalTimeout,
    AwaitApproval,
    BatchCall,
    CallModel,
    Cancel,
    Fail,
    Finish,
    LoopCommand,
    LoopConfig,
    LoopEvent,
    LoopState,
    ModelTurn,
    RequestApproval,
    RunStatus,
    RunTools,
    ToolCallRef,
    ToolInvocation,
    ToolResults,
    forces_tool_call,
)


class LoopError(ValueError):
    """An event the loop cannot accept in its current state (a bug in the driver, or a stale/duplicate input)."""


class UnknownApprovalError(LoopError):
    """A decision names a call that is not waiting for approval."""


class ApprovalAlreadyDecidedError(LoopError):
    """A second decision for the same call."""


# Reasons a run finished; stable strings (clients and tests rely on them).
REASON_ANSWERED = "stop"
REASON_TOOL_CHOICE_REQUIRED = "tool_choice_required"
REASON_MIDDLEWARE_TERMINATION = "middleware_termination"
REASON_MAX_ITERATIONS = "max_iterations"
REASON_MAX_CONSECUTIVE_ERRORS = "max_consecutive_errors"
REASON_UNKNOWN_TOOL = "unknown_tool"
REASON_TOOL_CALLS_NOT_ALLOWED = "tool_calls_not_allowed"
REASON_APPROVAL_TIMEOUT = "approval_timeout"
REASON_CANCELLED = "cancelled"
REASON_BUDGET_EXCEEDED = "budget_exceeded"


class AgentLoop:
    """Feed it what happened, it says what to do next. Not thread-safe; one instance per run."""

    def __init__(self, config: LoopConfig | None = None, *, state: LoopState | None = None) -> None:
        if state is not None and config is not None:
            raise ValueError("pass a config for a new loop or a state to resume one, not both")
        self.state = state if state is not None else LoopState(config=config or LoopConfig())

    @property
    def finished(self) -> bool:
        return self.state.phase == "finished"

    @property
    def config(self) -> LoopConfig:
        return self.state.config

    @property
    def awaiting_approval(self) -> list[str]:
        """Call ids still waiting for a decision (empty unless the loop is waiting for approvals)."""
        return [item.ref.call_id for item in self.state.batch if item.decision == "pending"]

    def start(self) -> LoopCommand:
        if self.state.phase != "idle":
            raise LoopError(f"the loop was already started (phase {self.state.phase!r})")
        return self._call_model()

    def send(self, event: LoopEvent) -> LoopCommand:
        phase = self.state.phase
        if phase == "finished":
            raise LoopError("the loop has finished; it accepts no more events")
        # Ended while a model call was in flight: its failed attempts may have been billed (`Finish.unanswered_call`).
        unanswered = self.state.iteration if phase == "awaiting_model" else None
        if isinstance(event, Cancel):
            return self._finish("cancelled", event.reason or REASON_CANCELLED, unanswered)
        if isinstance(event, Fail):
            return self._finish("failed", event.reason, unanswered)
        if phase == "awaiting_model" and isinstance(event, ModelTurn):
            return self._on_model_turn(event)
        if phase == "awaiting_tools" and isinstance(event, ToolResults):
            return self._on_tool_results(event)
        if phase == "awaiting_approval" and isinstance(event, ApprovalDecision):
            return self._on_decision(event)
        if phase == "awaiting_approval" and isinstance(event, ApprovalTimeout):
            return self._on_approval_timeout()
        raise LoopError(f"unexpected {type(event).__name__} while {phase}")

    # ------------------------------------------------------------------------------------------------- transitions

    def _call_model(self) -> CallModel | Finish:
        state = self.state
        budget = state.config.budget
        if budget is not None and budget.exceeded(state.usage, state.iteration) is not None:
            return self._finish("completed", REASON_BUDGET_EXCEEDED)
        state.iteration += 1
        state.phase = "awaiting_model"
        state.batch = []
        disabled = state.tools_disabled_reason
        return CallModel(
            iteration=state.iteration,
            tool_choice="none" if disabled else state.config.tool_choice,
            tools_disabled_reason=disabled,
        )

    def _on_model_turn(self, turn: ModelTurn) -> LoopCommand:
        state = self.state
        state.usage = state.usage + turn.usage
        calls = turn.tool_calls
        if turn.terminated:
            # seed 000: chat middleware wraps the function-invocation loop; terminating it ends the run.
            return self._finish("completed", REASON_MIDDLEWARE_TERMINATION)
        if not calls:
            return self._finish("completed", state.tools_disabled_reason or turn.finish_reason or REASON_ANSWERED)
        state.batch = [BatchCall(ref=call) for call in calls]
        if state.tools_disabled_reason or state.config.tool_choice == "none":
            # The model called tools it was told not to call; running them would defy the caller's choice.
            return self._finish("completed", REASON_TOOL_CALLS_NOT_ALLOWED)
        unknown = [call.name for call in calls if not call.known]
        if unknown and state.config.terminate_on_unknown_calls:
            return self._finish("failed", f"{REASON_UNKNOWN_TOOL}: {', '.join(unknown)}")
        for item in state.batch:
            if item.ref.known and item.ref.needs_approval:
                item.decision = "pending"
        needing = [item.ref for item in state.batch if item.decision == "pending"]
        if needing:
            state.phase = "awaiting_approval"
            return RequestApproval(calls=needing)
        return self._run_batch()

    def _on_decision(self, decision: ApprovalDecision) -> LoopCommand:
        item = next((i for i in self.state.batch if i.ref.call_id == decision.call_id), None)
        if item is None or item.decision == "not_needed":
            raise UnknownApprovalError(f"call {decision.call_id!r} is not waiting for approval")
        if item.decision != "pending":
            raise ApprovalAlreadyDecidedError(f"call {decision.call_id!r} was already {item.decision}")
        item.decision = "approved" if decision.approved else "rejected"
        item.reason = decision.reason
        item.edited = decision.approved and decision.edited
        if pending := self.awaiting_approval:
            return AwaitApproval(pending=pending)
        return self._run_batch()

    def _on_approval_timeout(self) -> LoopCommand:
        if self.config.on_approval_timeout == "fail":
            return self._finish("failed", REASON_APPROVAL_TIMEOUT)
        for item in self.state.batch:
            if item.decision == "pending":
                item.decision, item.reason = "rejected", "no decision before the approval deadline"
        return self._run_batch()

    def _run_batch(self) -> RunTools:
        invocations = []
        for item in self.state.batch:
            if not item.ref.known:
                item.action = "unknown"
            elif item.decision == "rejected":
                item.action = "deny"
            else:
                item.action = "invoke"
            reason = item.reason if item.action == "deny" else None
            invocations.append(
                ToolInvocation(call_id=item.ref.call_id, name=item.ref.name, action=item.action, reason=reason)
            )
        self.state.phase = "awaiting_tools"
        return RunTools(calls=invocations)

    def _on_tool_results(self, results: ToolResults) -> LoopCommand:
        state = self.state
        expected = {item.ref.call_id: item for item in state.batch}
        received = {outcome.call_id: outcome for outcome in results.outcomes}
        if received.keys() != expected.keys():
            missing, extra = expected.keys() - received.keys(), received.keys() - expected.keys()
            raise LoopError(f"tool results do not match the batch (missing {sorted(missing)}, extra {sorted(extra)})")
        # A denial is the user's decision, not a failure: only calls that were attempted count as errors.
        failed = any(received[cid].is_error for cid, item in expected.items() if item.action != "deny")
        state.consecutive_error_batches = state.consecutive_error_batches + 1 if failed else 0
        state.batch = []
        if any(outcome.terminated for outcome in results.outcomes):
            return self._finish("completed", REASON_MIDDLEWARE_TERMINATION)
        if forces_tool_call(state.config.tool_choice):
            return self._finish("completed", REASON_TOOL_CHOICE_REQUIRED)
        if state.consecutive_error_batches >= state.config.max_consecutive_errors:
            state.tools_disabled_reason = state.tools_disabled_reason or REASON_MAX_CONSECUTIVE_ERRORS
        if state.iteration >= state.config.max_iterations:
            state.tools_disabled_reason = REASON_MAX_ITERATIONS
        return self._call_model()

    def _finish(self, status: RunStatus, reason: str, unanswered_call: int | None = None) -> Finish:
        state = self.state
        # Calls of the current batch have no stored result yet (awaiting approval/tools, or refused above).
        unresolved: list[ToolCallRef] = [item.ref for item in state.batch]
        state.batch = []
        state.phase = "finished"
        state.finish = Finish(
            status=status, reason=reason, unresolved=unresolved, usage=state.usage, unanswered_call=unanswered_call
        )
        return state.finish


__all__ = [
    "REASON_ANSWERED",
    "REASON_APPROVAL_TIMEOUT",
    "REASON_BUDGET_EXCEEDED",
    "REASON_CANCELLED",
    "REASON_MAX_CONSECUTIVE_ERRORS",
    "REASON_MAX_ITERATIONS",
    "REASON_MIDDLEWARE_TERMINATION",
    "REASON_TOOL_CALLS_NOT_ALLOWED",
    "REASON_TOOL_CHOICE_REQUIRED",
    "REASON_UNKNOWN_TOOL",
    "AgentLoop",
    "ApprovalAlreadyDecidedError",
    "LoopError",
    "UnknownApprovalError",
]
