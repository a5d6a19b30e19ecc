"""Typed workflow definitions: steps, their options, and the checks that run when a definition is built.

A workflow is a list of steps run in order. Each step has an `id` (unique in the workflow) and its output can be
referenced by later steps (`{{ steps.<id>.text }}` in prompts, `steps.<id>.value.x` in conditions):

    WorkflowDefinition(
        name="review_pipeline",
        input_model=ReviewInput,
        steps=[
            AgentStep(id="write", agent="writer", prompt="Write about {{ input.topic }}."),
            AgentStep(id="review", agent="reviewer", prompt="Review:\n{{ steps.write.text }}"),
            ApprovalStep(id="sign_off", message="Publish?", timeout_seconds=86400,
                         on_timeout=Escalate(to="editor-in-chief", timeout_seconds=86400, then="reject")),
        ],
        output={"draft": "steps.write.text", "approved": "steps.sign_off.approved"},
    )

Outputs: agent step `{"text", "value"?, "run_id", "session_id"}`; parallel step `{<branch id>: <agent output>}`;
function step: what the function returns; approval `{"approved", "decided_by", "reason", "escalated", "timed_out"}`;
signal: the payload the caller sent (`{"payload", "timed_out"}`); delay `{"until"}`; monitor: the last check's output
plus `{"iteration", "condition_met"}`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from agent_runtime.escalation import Escalate, FinalAction
from workflow_runtime.references import Condition, parse_path, template_paths

StepId = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,47}$")]
SignalName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
WorkflowName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]


class StepData(BaseModel):
    """What a function step receives: the workflow input and the outputs of the steps that ran before it."""

    model_config = ConfigDict(frozen=True)

    input: dict[str, Any]
    steps: dict[str, Any]


StepFunction = Callable[[StepData], dict[str, Any] | Awaitable[dict[str, Any]]]


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    id: StepId
    title: str = ""

    def references(self) -> list[str]:
        """Every reference the step uses (prompt placeholders, conditions, times)."""
        return []

    def children(self) -> list[_Step]:
        return []


class AgentStep(_Step):
    """Run an agent as a child run (a sub-orchestration: an ordinary run, pollable at `/api/runs/{id}`).

    `session="own"`: a fresh session per run; `"workflow"`: the workflow's conversation session (one agent,
    `WorkflowDefinition.session_agent`, continues one conversation across steps and with the caller)."""

    kind: Literal["agent"] = "agent"
    agent: str
    prompt: Annotated[str, StringConstraints(min_length=1)]
    session: Literal["own", "workflow"] = "own"

    def references(self) -> list[str]:
        return template_paths(self.prompt)


class FunctionStep(_Step):
    """Run a Python function over earlier outputs (a merge, a score...): `function(StepData) -> dict`."""

    kind: Literal["function"] = "function"
    function: StepFunction
    uses: list[str] = Field(default_factory=list, description="references the function reads (checked at start-up)")

    def references(self) -> list[str]:
        return list(self.uses)


class ParallelStep(_Step):
    """Fan-out: run the branches concurrently (each its own child run); fan-in: output maps branch id -> output.
    `merge` (an agent or a function step) runs next and sees `steps.<this id>.<branch id>`. A branch that fails
    fails the step at once and cancels the branches still running (`on_branch_failure="wait"`: the step waits for
    them first)."""

    kind: Literal["parallel"] = "parallel"
    branches: Annotated[list[AgentStep], Field(min_length=2, max_length=16)]
    merge: AgentStep | FunctionStep | None = None
    on_branch_failure: Literal["cancel_others", "wait"] = "cancel_others"

    def children(self) -> list[_Step]:
        return [*self.branches, *([self.merge] if self.merge else [])]


class ApprovalStep(_Step):
    """A person approves or rejects (through the run approval routes, with the workflow run id)."""

    kind: Literal["approval"] = "approval"
    message: Annotated[str, StringConstraints(min_length=1)]
    approver: str | None = None
    timeout_seconds: float = Field(gt=0)
    on_timeout: FinalAction | Escalate = "reject"
    on_reject: Literal["fail", "continue"] = "fail"

    def references(self) -> list[str]:
        return template_paths(self.message)


class SignalStep(_Step):
    """Wait for `POST /api/workflows/runs/{run_id}/signals/{name}`; its JSON payload becomes the step output."""

    kind: Literal["signal"] = "signal"
    name: SignalName
    timeout_seconds: float | None = Field(default=None, gt=0)
    on_timeout: Literal["fail", "continue"] = "fail"


class DelayStep(_Step):
    """A durable delay: `seconds` from now, or `until` a time (a reference to an ISO 8601 datetime)."""

    kind: Literal["delay"] = "delay"
    seconds: float | None = Field(default=None, ge=0)
    until: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> DelayStep:
        if (self.seconds is None) == (self.until is None):
            raise ValueError("set exactly one of 'seconds' and 'until'")
        if self.until is not None:
            parse_path(self.until)
        return self

    def references(self) -> list[str]:
        return [self.until] if self.until else []


class BranchStep(_Step):
    """Run `then` when the condition holds, else `otherwise` (typically on an agent's structured output)."""

    kind: Literal["branch"] = "branch"
    when: Condition
    then: list[Step] = Field(default_factory=list)
    otherwise: list[Step] = Field(default_factory=list)

    def references(self) -> list[str]:
        return [self.when.ref]

    def children(self) -> list[_Step]:
        return [*self.then, *self.otherwise]


class MonitorStep(_Step):
    """Poll: run the check (an agent or a function) every `every_seconds` until `until` holds on its output
    (`steps.<this id>...`) or the deadline passes. No deadline = an eternal monitor (it continues as new)."""

    kind: Literal["monitor"] = "monitor"
    agent: str | None = None
    prompt: str | None = None
    function: StepFunction | None = None
    every_seconds: float = Field(gt=0)
    until: Condition
    deadline_seconds: float | None = Field(default=None, gt=0)
    on_deadline: Literal["fail", "continue"] = "fail"

    @model_validator(mode="after")
    def _one_check(self) -> MonitorStep:
        if (self.function is None) == (self.agent is None):
            raise ValueError("set exactly one check: 'agent' (with 'prompt') or 'function'")
        if self.agent is not None and not self.prompt:
            raise ValueError("an agent check needs a 'prompt'")
        return self

    def references(self) -> list[str]:
        return template_paths(self.prompt or "")

    def check_step(self) -> AgentStep | FunctionStep:
        """The check as a step of its own (same id: its output is the monitor's)."""
        if self.function is not None:
            return FunctionStep(id=self.id, function=self.function)
        if self.agent is None or self.prompt is None:  # pragma: no cover - `_one_check` allows no other case
            raise ValueError(f"monitor {self.id!r} has neither a function nor an agent with a prompt")
        return AgentStep(id=self.id, agent=self.agent, prompt=self.prompt)


Step = Annotated[
    AgentStep | FunctionStep | ParallelStep | ApprovalStep | SignalStep | DelayStep | BranchStep | MonitorStep,
    Field(discriminator="kind"),
]
BranchStep.model_rebuild()


StepT = TypeVar("StepT", bound=_Step)


class WorkflowDefinitionError(ValueError):
    """A workflow definition is invalid; the message names the workflow and the step."""


class WorkflowDefinition(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    name: WorkflowName
    description: str = ""
    input_model: type[BaseModel]
    steps: Annotated[list[Step], Field(min_length=1)]
    session_agent: str | None = None
    """The agent of the workflow's conversation session (steps with `session="workflow"` must use it)."""
    output: dict[str, str] = Field(default_factory=dict)
    """Final output: name -> reference. Empty: the output of the last step that ran, as `{"result": ...}`."""

    @model_validator(mode="after")
    def _consistent(self) -> WorkflowDefinition:
        seen: set[str] = set()
        for step in self.all_steps():
            if step.id in seen:
                raise ValueError(f"step id {step.id!r} is used twice")
            seen.add(step.id)
            for ref in step.references():
                self._check_reference(step.id, ref, earlier=seen - {step.id} | self._own_ids(step))
            self._check_session(step)
        for name, ref in self.output.items():
            self._check_reference(f"output.{name}", ref, earlier=seen)
        return self

    @staticmethod
    def _own_ids(step: _Step) -> set[str]:
        # A monitor's condition refers to its own latest check; a parallel's merge to the parallel.
        return {step.id} if isinstance(step, MonitorStep) else set()

    def _check_reference(self, where: str, ref: str, *, earlier: set[str]) -> None:
        parts = parse_path(ref)
        if parts[0] == "input":
            if len(parts) > 1 and parts[1] not in self.input_model.model_fields:
                raise ValueError(f"step {where!r}: {ref!r} is not a field of {self.input_model.__name__}")
        elif parts[1] not in earlier:
            raise ValueError(f"step {where!r}: {ref!r} refers to a step that does not run before it")

    def _check_session(self, step: _Step) -> None:
        if isinstance(step, AgentStep) and step.session == "workflow" and step.agent != self.session_agent:
            raise ValueError(
                f"step {step.id!r} runs in the workflow session, which belongs to agent {self.session_agent!r}, "
                f"not {step.agent!r}"
            )
        if isinstance(step, ParallelStep) and any(b.session == "workflow" for b in step.branches):
            raise ValueError(f"step {step.id!r}: parallel branches cannot share the workflow session")

    # ------------------------------------------------------------------------------------------------ queries

    def all_steps(self) -> Iterator[_Step]:
        """Every step, nested ones included, in document order."""

        def walk(steps: list[Any]) -> Iterator[_Step]:
            for step in steps:
                yield step
                yield from walk(step.children())

        yield from walk(list(self.steps))

    def step(self, step_id: str) -> _Step:
        for step in self.all_steps():
            if step.id == step_id:
                return step
        raise KeyError(f"workflow {self.name!r} has no step {step_id!r}")

    def step_as(self, step_id: str, kind: type[StepT]) -> StepT:
        """The step, which must be of `kind` (a workflow's steps run by kind: another kind here is a bug)."""
        step = self.step(step_id)
        if not isinstance(step, kind):
            found = type(step).__name__
            raise TypeError(f"step {step_id!r} of workflow {self.name!r} is a {found}, not a {kind.__name__}")
        return step

    def agent_names(self) -> set[str]:
        names = {s.agent for s in self.all_steps() if isinstance(s, AgentStep | MonitorStep) and s.agent}
        return names | ({self.session_agent} if self.session_agent else set())

    def signal_names(self) -> set[str]:
        return {s.name for s in self.all_steps() if isinstance(s, SignalStep)}

    def input_schema(self) -> dict[str, Any]:
        return self.input_model.model_json_schema()

    def check_agents(self, known: set[str]) -> None:
        missing = sorted(self.agent_names() - known)
        if missing:
            raise WorkflowDefinitionError(f"workflow {self.name!r} uses unknown agents: {', '.join(missing)}")
