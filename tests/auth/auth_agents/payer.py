"""Agents whose tools name their approvers: payments by a role (never by the run's owner), notes by the owner; the
escalating payer hands undecided calls to supervisors at its first deadline."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from agent_runtime.agents import AgentDefinition
from agent_runtime.escalation import Escalate
from agent_runtime.tools import ToolContext, tool

PAYMENTS_ROLE = "Payments.Approver"
SUPERVISOR_ROLE = "Supervisors"
FIRST_DEADLINE_SECONDS = 600


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


escalating_payer = AgentDefinition(
    name="escalating_payer", description="Pays; a payment nobody decided in time goes to a supervisor.",
    instructions="You pay people.", tools=[pay, note], approval_timeout_seconds=FIRST_DEADLINE_SECONDS,
    on_approval_timeout=Escalate(to=f"role:{SUPERVISOR_ROLE}", timeout_seconds=3600, then="reject"),
)
