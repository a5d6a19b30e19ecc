"""`follow_up`: two days after a support conversation the assistant follows up in the same session, then a
checker looks at the ticket every 12 hours until it is resolved or a week has passed."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, StringConstraints

from workflow_runtime import AgentStep, Condition, DelayStep, MonitorStep, WorkflowDefinition

HOUR = 3600
DAY = 24 * HOUR


class FollowUpInput(BaseModel):
    ticket: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    note: Annotated[str, StringConstraints(max_length=2000)] = ""


follow_up = WorkflowDefinition(
    name="follow_up",
    description="Follow up after two days in the caller's session, then re-check the ticket every 12 h for a week.",
    input_model=FollowUpInput,
    session_agent="assistant",
    steps=[
        DelayStep(id="wait", seconds=2 * DAY),
        AgentStep(
            id="follow_up",
            agent="assistant",
            session="workflow",
            prompt="Two days have passed. Write a short follow-up about ticket {{ input.ticket }}. {{ input.note }}",
        ),
        MonitorStep(
            id="watch",
            agent="status_checker",
            prompt="Is ticket {{ input.ticket }} resolved?",
            every_seconds=12 * HOUR,
            until=Condition(ref="steps.watch.value.resolved", op="truthy"),
            deadline_seconds=7 * DAY,
            on_deadline="continue",
        ),
    ],
    output={
        "follow_up": "steps.follow_up.text",
        "resolved": "steps.watch.value.resolved",
        "status": "steps.watch.value.status",
        "checks": "steps.watch.checks",
    },
)
