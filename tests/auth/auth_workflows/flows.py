"""A workflow whose approval gate names a role: only a publisher decides it."""

from __future__ import annotations

from pydantic import BaseModel

from workflow_runtime import ApprovalStep, WorkflowDefinition

PUBLISHER_ROLE = "Publisher"


class Draft(BaseModel):
    title: str = "Durable agents"


publish_flow = WorkflowDefinition(
    name="publish_flow",
    input_model=Draft,
    steps=[
        ApprovalStep(
            id="publish", message="Publish {{ input.title }}?", approver=f"role:{PUBLISHER_ROLE}", timeout_seconds=3600
        ),
    ],
    output={"approved": "steps.publish.approved", "decided_by": "steps.publish.decided_by"},
)
