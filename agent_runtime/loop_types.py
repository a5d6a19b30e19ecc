"""The vocabulary of the sans-IO agent loop: its configuration, the events it is fed, the commands it returns and its
serialisable state.

Everything here is small on purpose: the durable orchestrator replays these values from history on every episode, so
events carry summaries (call ids, tool names, flags, usage), never conversation content. Each union is discriminated by
`kind` so values round-trip through JSON (Durable payloads, continue-as-new input).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from .messages import Usage
from .spend import RunBudget


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RequiredFunction(_Model):
    """`tool_choice` naming the one function the model must call (seed 000's `{"mode": "required", ...}`)."""

    mode: Literal["required"] = "required"
    required_function_name: str


ToolChoice = Literal["auto", "none", "required"] | RequiredFunction


def forces_tool_call(choice: ToolChoice) -> bool:
    """`required` and a named function both force a call; the loop then returns right after the tools run."""
    return isinstance(choice, RequiredFunction) or choice == "required"


class LoopConfig(_Model):
    """Seed 000's `FunctionInvocationConfiguration`, plus what the durable approval wait needs."""

    max_iterations: int = Field(default=40, ge=1)
    max_consecutive_errors: int = Field(default=3, ge=1)
    terminate_on_unknown_calls: bool = False
    tool_choice: ToolChoice = "auto"
    on_approval_timeout: Literal["reject", "fail"] = "reject"
    budget: RunBudget | None = None
    """Checked before every model call (`RunBudget.exceeded`): a spent budget ends the run `budget_exceeded`."""


# --------------------------------------------------------------------------------------------------- events (inputs)


class ToolCallRef(_Model):
    """One call the model proposed, as the step that saw its arguments summarised it."""

    call_id: str
    name: str
    known: bool = True
    needs_approval: bool = False


class ModelTurn(_Model):
    """The model answered (the step already stored the assistant message)."""

    kind: Literal["model_turn"] = "model_turn"
    tool_calls: list[ToolCallRef] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    has_text: bool = False
    terminated: bool = False
    """Chat middleware raised `MiddlewareTermination` with a result: that result is the answer, the loop ends."""
    model: str | None = None
    """The model that answered (as the provider named it), when known."""


class ToolOutcome(_Model):
    """One call's result was stored. `is_error`: the call failed (bad arguments, exception, timeout, unknown tool).
    `terminated`: function middleware raised `MiddlewareTermination` - the loop ends without another model call."""

    call_id: str
    is_error: bool = False
    terminated: bool = False


class ToolResults(_Model):
    """Every call of the batch in the last `RunTools` has a stored result."""

    kind: Literal["tool_results"] = "tool_results"
    outcomes: list[ToolOutcome]


class ApprovalDecision(_Model):
    """A human decided on one call. `edited`: approved with edited arguments (stored with the decision; the tool step
    validates them against the schema before running)."""

    kind: Literal["approval_decision"] = "approval_decision"
    call_id: str
    approved: bool
    reason: str | None = None
    edited: bool = False


class ApprovalTimeout(_Model):
    """Nobody decided in time; `LoopConfig.on_approval_timeout` says what happens to the undecided calls."""

    kind: Literal["approval_timeout"] = "approval_timeout"


class Cancel(_Model):
    kind: Literal["cancel"] = "cancel"
    reason: str | None = None


class Fail(_Model):
    """A step failed for good (e.g. a non-retryable model error, retries exhausted)."""

    kind: Literal["fail"] = "fail"
    reason: str


LoopEvent = Annotated[
    ModelTurn | ToolResults | ApprovalDecision | ApprovalTimeout | Cancel | Fail, Field(discriminator="kind")
]


# --------------------------------------------------------------------------------------------------- commands (outputs)


class CallModel(_Model):
    """Call the model on the stored conversation. `tool_choice` is what to send (it is `"none"` once tools were turned
    off by the error limit or the iteration budget; `tools_disabled_reason` then says why)."""

    kind: Literal["call_model"] = "call_model"
    iteration: int
    tool_choice: ToolChoice
    tools_disabled_reason: str | None = None


ToolAction = Literal["invoke", "deny", "unknown"]


class ToolInvocation(_Model):
    """What the tool step does for one call: run it, write "denied" (with the reason), or write "unknown tool"."""

    call_id: str
    name: str
    action: ToolAction = "invoke"
    reason: str | None = None


class RunTools(_Model):
    """Write a result for every call in `calls` (run them concurrently), then send `ToolResults`."""

    kind: Literal["run_tools"] = "run_tools"
    calls: list[ToolInvocation]


class RequestApproval(_Model):
    """Record approval requests for `calls`, expose them (status `requires_action`) and wait for decisions."""

    kind: Literal["request_approval"] = "request_approval"
    calls: list[ToolCallRef]


class AwaitApproval(_Model):
    """Some decisions are in; keep waiting for the calls in `pending` (requests are already recorded)."""

    kind: Literal["await_approval"] = "await_approval"
    pending: list[str]


RunStatus = Literal["completed", "failed", "cancelled"]


class Finish(_Model):
    """The run is over. `unresolved` calls have no result yet: the executor writes an error result for each (saying
    why the run ended) so the stored conversation stays valid for the next run in the session."""

    kind: Literal["finish"] = "finish"
    status: RunStatus
    reason: str
    unresolved: list[ToolCallRef] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    unanswered_call: int | None = Field(
        default=None,
        description="the iteration of the model call in flight when the run failed or was cancelled: `usage` has "
        "no answer of it, though its failed attempts may have been billed",
    )


LoopCommand = Annotated[CallModel | RunTools | RequestApproval | AwaitApproval | Finish, Field(discriminator="kind")]


# --------------------------------------------------------------------------------------------------- state

Phase = Literal["idle", "awaiting_model", "awaiting_tools", "awaiting_approval", "finished"]
Decision = Literal["not_needed", "pending", "approved", "rejected"]


class BatchCall(_Model):
    """A call of the current batch and what has been decided/done about it."""

    ref: ToolCallRef
    decision: Decision = "not_needed"
    reason: str | None = None
    edited: bool = False
    action: ToolAction | None = None  # set when the batch is handed to the tools


class LoopState(_Model):
    """Everything the loop remembers; a JSON round-trip of it resumes the loop exactly (continue-as-new)."""

    config: LoopConfig = Field(default_factory=LoopConfig)
    phase: Phase = "idle"
    iteration: int = 0  # model calls issued
    consecutive_error_batches: int = 0
    tools_disabled_reason: str | None = None
    batch: list[BatchCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    finish: Finish | None = None
