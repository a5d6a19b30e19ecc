"""Test-only workflows (see the package docstring)."""

from __future__ import annotations

from typing import Any

from pydantic import AwareDatetime, BaseModel

from workflow_runtime import (
    AgentStep,
    Condition,
    DelayStep,
    FunctionStep,
    MonitorStep,
    ParallelStep,
    SignalStep,
    StepData,
    WorkflowDefinition,
)


class Topic(BaseModel):
    topic: str = "durable agents"


class Scheduled(BaseModel):
    at: AwareDatetime
    topic: str = "durable agents"


def add_up(data: StepData) -> dict[str, Any]:
    raise ValueError("the numbers do not add up")


def never_changes(data: StepData) -> dict[str, Any]:
    return {"changed": False}


signal_flow = WorkflowDefinition(
    name="signal_flow",
    input_model=Scheduled,
    steps=[
        DelayStep(id="until_start", until="input.at"),
        SignalStep(id="data", name="data_ready", timeout_seconds=3600, on_timeout="fail"),
        AgentStep(
            id="write", agent="writer", prompt="Write about {{ input.topic }} using {{ steps.data.payload.fact }}"
        ),
    ],
    output={"fact": "steps.data.payload.fact", "draft": "steps.write.text"},
)

failing_flow = WorkflowDefinition(
    name="failing_flow",
    input_model=Topic,
    steps=[
        AgentStep(id="write", agent="writer", prompt="Write about {{ input.topic }}"),
        FunctionStep(id="add_up", function=add_up, uses=["steps.write.text"]),
        AgentStep(id="never", agent="writer", prompt="never runs"),
    ],
)

eternal_monitor = WorkflowDefinition(
    name="eternal_monitor",
    input_model=Topic,
    steps=[
        MonitorStep(
            id="watch",
            function=never_changes,
            every_seconds=3600,
            until=Condition(ref="steps.watch.changed", op="truthy"),
        )
    ],
)

cancel_flow = WorkflowDefinition(
    name="cancel_flow",
    input_model=Topic,
    steps=[
        AgentStep(id="mail", agent="assistant", prompt="Please email bob about {{ input.topic }}"),
        AgentStep(id="after", agent="writer", prompt="never runs"),
    ],
)

WAITING_BRANCHES = [
    AgentStep(id="mailer", agent="assistant", prompt="Please email bob about {{ input.topic }}"),
    AgentStep(id="legal", agent="legal_expert", prompt="{{ input.topic }}?"),
    AgentStep(id="finance", agent="finance_expert", prompt="{{ input.topic }}?"),
]

# A failed branch waits for the others (the mailer waits for a person): a rewound branch, a cancel find them running.
parallel_wait_flow = WorkflowDefinition(
    name="parallel_wait_flow",
    input_model=Topic,
    steps=[ParallelStep(id="fan", branches=WAITING_BRANCHES, on_branch_failure="wait")],
    output={"mail": "steps.fan.mailer.text", "legal": "steps.legal.text"},
)

# The same branches, failing fast (the default).
parallel_fail_fast_flow = WorkflowDefinition(
    name="parallel_fail_fast_flow",
    input_model=Topic,
    steps=[ParallelStep(id="fan", branches=WAITING_BRANCHES)],
)


# Two branches that each wait for a person (their email's approval): a branch rewound on its own waits for as long.
MAIL_BRANCHES = [
    AgentStep(id="bob", agent="assistant", prompt="Please email bob about {{ input.topic }}"),
    AgentStep(id="carol", agent="assistant", prompt="Please email carol about {{ input.topic }}"),
]
MAIL_OUTPUT = {"bob": "steps.fan.bob.text", "carol": "steps.fan.carol.text"}

parallel_mail_flow = WorkflowDefinition(
    name="parallel_mail_flow",
    input_model=Topic,
    steps=[ParallelStep(id="fan", branches=MAIL_BRANCHES, on_branch_failure="wait")],
    output=MAIL_OUTPUT,
)

# The same two branches, failing fast (the default): a branch that fails cancels the other, waiting for its person.
parallel_mail_fail_fast_flow = WorkflowDefinition(
    name="parallel_mail_fail_fast_flow",
    input_model=Topic,
    steps=[ParallelStep(id="fan", branches=MAIL_BRANCHES)],
    output=MAIL_OUTPUT,
)


def join_opinions(data: StepData) -> dict[str, Any]:
    opinions = data.steps["opinions"]
    return {"joined": " | ".join(opinions[branch]["text"] for branch in ("legal", "finance"))}


function_merge_flow = WorkflowDefinition(
    name="function_merge_flow",
    input_model=Topic,
    steps=[
        ParallelStep(
            id="opinions",
            branches=[
                AgentStep(id="legal", agent="legal_expert", prompt="{{ input.topic }}?"),
                AgentStep(id="finance", agent="finance_expert", prompt="{{ input.topic }}?"),
            ],
            merge=FunctionStep(id="merged", function=join_opinions, uses=["steps.opinions"]),
        )
    ],
    output={"joined": "steps.merged.joined"},
)

# A signal wait with no timeout after an agent step: only the signal or a cancel ends it (the cancel must reach
# a race that is not the workflow's first).
open_signal_flow = WorkflowDefinition(
    name="open_signal_flow",
    input_model=Topic,
    steps=[
        AgentStep(id="write", agent="writer", prompt="Write about {{ input.topic }}"),
        SignalStep(id="go", name="go_ahead"),
        DelayStep(id="pause", seconds=3600),
        SignalStep(id="go_again", name="go_ahead"),
    ],
    output={"draft": "steps.write.text", "second": "steps.go_again.payload"},
)

# The child run of the second step waits for a person: a cancel must reach it through a race that is not the first.
second_step_cancel_flow = WorkflowDefinition(
    name="second_step_cancel_flow",
    input_model=Topic,
    steps=[
        AgentStep(id="write", agent="writer", prompt="Write about {{ input.topic }}"),
        AgentStep(id="mail", agent="assistant", prompt="Please email bob about {{ input.topic }}"),
        AgentStep(id="after", agent="writer", prompt="never runs"),
    ],
)

# A queue of 30 signals of one name, consumed one step each after a pause (signals may come before any wait). 30
# steps: the workflow continues as new after 24 (`STEPS_PER_EXECUTION`), which drops the events it had deferred.
QUEUED_SIGNALS = 30
signal_queue_flow = WorkflowDefinition(
    name="signal_queue_flow",
    input_model=Topic,
    steps=[
        DelayStep(id="pause", seconds=60),
        *(SignalStep(id=f"item_{i:02d}", name="item") for i in range(1, QUEUED_SIGNALS + 1)),
    ],
    output={f"item_{i:02d}": f"steps.item_{i:02d}.payload" for i in range(1, QUEUED_SIGNALS + 1)},
)

# A monitor that checks hourly for 30 hours (it continues as new on the way), then waits for two signals of one
# name: signals sent while it monitors are rung in an execution that is gone by the time they are waited for.
monitor_then_signals_flow = WorkflowDefinition(
    name="monitor_then_signals_flow",
    input_model=Topic,
    steps=[
        MonitorStep(
            id="watch",
            function=never_changes,
            every_seconds=3600,
            until=Condition(ref="steps.watch.changed", op="truthy"),
            deadline_seconds=30 * 3600,
            on_deadline="continue",
        ),
        SignalStep(id="first", name="go"),
        SignalStep(id="second", name="go"),
    ],
    output={"first": "steps.first.payload", "second": "steps.second.payload"},
)


def ok(data: StepData) -> dict[str, Any]:
    return {"ok": True}


# So many steps with long ids that the step references the orchestrator carries (`refs`) outgrow the 16 KB budget.
MANY_STEPS = 300
many_steps_flow = WorkflowDefinition(
    name="many_steps_flow",
    input_model=Topic,
    steps=[FunctionStep(id=f"step_{i:03d}_{'x' * 39}", function=ok) for i in range(MANY_STEPS)],
)
