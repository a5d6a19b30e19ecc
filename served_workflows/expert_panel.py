"""`expert_panel`: three specialists answer the same question at once (three child runs), then a chair merges
their opinions into one recommendation."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, StringConstraints

from workflow_runtime import AgentStep, ParallelStep, WorkflowDefinition


class PanelInput(BaseModel):
    question: Annotated[str, StringConstraints(min_length=1, max_length=2000)]


expert_panel = WorkflowDefinition(
    name="expert_panel",
    description="Legal, finance and technical experts answer concurrently; a chair merges their opinions.",
    input_model=PanelInput,
    steps=[
        ParallelStep(
            id="panel",
            branches=[
                AgentStep(id="legal", agent="legal_expert", prompt="{{ input.question }}"),
                AgentStep(id="finance", agent="finance_expert", prompt="{{ input.question }}"),
                AgentStep(id="technical", agent="technical_expert", prompt="{{ input.question }}"),
            ],
            merge=AgentStep(
                id="recommendation",
                agent="panel_chair",
                prompt=(
                    "Question: {{ input.question }}\n\nLegal: {{ steps.panel.legal.text }}\n\n"
                    "Finance: {{ steps.panel.finance.text }}\n\nTechnical: {{ steps.panel.technical.text }}"
                ),
            ),
        ),
    ],
    output={
        "recommendation": "steps.recommendation.text",
        "legal": "steps.panel.legal.text",
        "finance": "steps.panel.finance.text",
        "technical": "steps.panel.technical.text",
    },
)
