"""An agent whose tools name their approvers: payments by a role (never by the run's owner), notes by the owner."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from agent_runtime.agents import AgentDefinition
from agent_runtime.tools import ToolContext, tool

PAYMENTS_ROLE = "Payments.Approver"


@tool(approval="always", approvers=[f"role:{PAYMENTS_ROLE}"], separation_of_duties=True)
async def pay(
    to: Annotated[str, Field(min_length=1)], amount: Annotated[int, Field(ge=1)], context: ToolContext
) -> dict:
    """Pay someone (a payments approver other than the requester decides)."""
    stored, created = await context.record_effect_once("payment", {"to": to, "amount": amount})
    return {"paid": stored, "first_time": created}


@tool(approval="always")
def note(text: Annotated[str, Field(min_length=1)]) -> dict:
    """Write a note (the run's owner decides: the default approvers)."""
    return {"noted": text}


payer = AgentDefinition(
    name="payer", description="Pays and notes.", instructions="You pay people.", tools=[pay, note]
)
