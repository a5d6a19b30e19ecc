"""Workflows served by the benchmark/load devhost (`WORKFLOWS_PACKAGE=bench.workload.workflows`), on the `worker`
agent.

- `signalled`: one agent step (the `worker`, a plain chat turn: one model call), then a wait for one `go` signal
  (the capacity benchmark's workflow run: its start, its step's child run, the signal route and the signal step).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from workflow_runtime import AgentStep, SignalStep, WorkflowDefinition


class SignalledInput(BaseModel):
    topic: str = Field(default="durable agents", min_length=1, max_length=200)


signalled = WorkflowDefinition(
    name="signalled",
    description="Benchmark workflow: one worker step, then one `go` signal.",
    input_model=SignalledInput,
    steps=[
        AgentStep(id="draft", agent="worker", prompt="Say something about {{ input.topic }}"),
        SignalStep(id="go", name="go"),
    ],
    output={"draft": "steps.draft.text", "go": "steps.go.payload"},
)

__all__ = ["signalled"]
