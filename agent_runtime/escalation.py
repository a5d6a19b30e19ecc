"""`Escalate`: what happens when nobody decides an approval in time - ask someone else, for a while, then give up.

Shared by agent runs (`AgentDefinition.on_approval_timeout`) and workflow approval gates (`ApprovalStep.on_timeout`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

FinalAction = Literal["approve", "reject", "fail"]


class Escalate(BaseModel):
    """On timeout, ask `to` (a principal id or `role:<app role>`) for `timeout_seconds` more, then apply `then`
    (agent runs accept `reject` or `fail` only: a tool call is never approved by a timer)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    to: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    timeout_seconds: float = Field(gt=0)
    then: FinalAction = "reject"
