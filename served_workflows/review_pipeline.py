"""`review_pipeline`: a writer drafts, a reviewer judges (structured verdict), the writer revises if asked, then a
person signs off within 24 h; if nobody does, the request escalates to the editor-in-chief for another 24 h, after
which the draft is not published."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, StringConstraints

from workflow_runtime import (
    AgentStep,
    ApprovalStep,
    BranchStep,
    Condition,
    Escalate,
    FunctionStep,
    StepData,
    WorkflowDefinition,
)

DAY = 86400


class ReviewInput(BaseModel):
    topic: Annotated[str, StringConstraints(min_length=1, max_length=500)]
    audience: Annotated[str, StringConstraints(min_length=1, max_length=200)] = "general readers"


def final_draft(data: StepData) -> dict[str, Any]:
    """The revised draft when the reviewer asked for one, else the first draft."""
    chosen = data.steps.get("revise") or data.steps["write"]
    return {"text": chosen["text"], "revised": "revise" in data.steps}


review_pipeline = WorkflowDefinition(
    name="review_pipeline",
    description="Writer -> reviewer (-> revision) -> human sign-off within 24 h, escalated to the editor-in-chief.",
    input_model=ReviewInput,
    steps=[
        AgentStep(
            id="write", agent="writer", prompt="Write a short draft about {{ input.topic }} for {{ input.audience }}."
        ),
        AgentStep(id="review", agent="reviewer", prompt="Review this draft:\n\n{{ steps.write.text }}"),
        BranchStep(
            id="needs_revision",
            when=Condition(ref="steps.review.value.verdict", op="eq", value="revise"),
            then=[
                AgentStep(
                    id="revise",
                    agent="writer",
                    prompt=(
                        "Revise this draft following the review.\n\nReview: {{ steps.review.value.comments }}\n\n"
                        "Draft:\n{{ steps.write.text }}"
                    ),
                )
            ],
        ),
        FunctionStep(id="final", function=final_draft, uses=["steps.write.text"]),
        ApprovalStep(
            id="sign_off",
            message="Publish this draft about {{ input.topic }}?\n\n{{ steps.final.text }}",
            approver="editor",
            timeout_seconds=DAY,
            on_timeout=Escalate(to="editor-in-chief", timeout_seconds=DAY, then="reject"),
            on_reject="continue",
        ),
    ],
    output={
        "draft": "steps.final.text",
        "revised": "steps.final.revised",
        "review": "steps.review.value",
        "published": "steps.sign_off.approved",
        "decided_by": "steps.sign_off.decided_by",
        "escalated": "steps.sign_off.escalated",
    },
)
