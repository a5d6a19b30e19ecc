"""`writer` and `reviewer`: the agents of the `review_pipeline` workflow.

The reviewer answers with structured output (`ReviewVerdict`), which the workflow branches on.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agent_runtime.agents import AgentDefinition


class ReviewVerdict(BaseModel):
    verdict: Literal["approve", "revise"]
    score: int = Field(ge=0, le=10)
    comments: str


writer = AgentDefinition(
    name="writer",
    description="Writes a short, clear draft on a topic.",
    instructions="You are a writer. Write a short, clear draft on the topic you are given. Answer with the draft only.",
)

reviewer = AgentDefinition(
    name="reviewer",
    description="Reviews a draft and returns a verdict (approve or revise), a score and comments.",
    instructions=(
        "You are a demanding reviewer. Review the draft you are given. Answer in JSON: verdict 'approve' or "
        "'revise', a score from 0 to 10 and short comments."
    ),
    output_type=ReviewVerdict,
)
