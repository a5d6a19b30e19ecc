"""`status_checker`: checks whether a customer's issue is resolved (structured output the monitor tests).

The check is deterministic demo data behind a tool (`lookup_ticket`), so the offline demo works without a
ticketing system: a real deployment replaces the tool with its ticketing API.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from agent_runtime.agents import AgentDefinition
from agent_runtime.tools import tool


class TicketStatus(BaseModel):
    resolved: bool
    status: str = Field(description="the ticket's status in a few words")


@tool
def lookup_ticket(ticket: Annotated[str, Field(min_length=1, max_length=64, description="Ticket id")]) -> dict:
    """Look up a support ticket's status."""
    return {"ticket": ticket, "status": "waiting for customer", "resolved": False}


status_checker = AgentDefinition(
    name="status_checker",
    description="Checks a support ticket and says whether it is resolved.",
    instructions=(
        "You check support tickets. Use lookup_ticket, then answer in JSON: resolved (true/false) and status."
    ),
    tools=[lookup_ticket],
    output_type=TicketStatus,
)
