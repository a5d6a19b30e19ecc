"""An agent whose approvals the run's owner may not decide until they are escalated to a role the owner holds
(`AGENTS_PACKAGE=rights_agents`, with `tests/e2e` on the path): what an approval's `decidable` says can change while
a client follows the run. A package of its own so the other end-to-end tests keep seeing only `fixture_agents`."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from agent_runtime.agents import AgentDefinition
from agent_runtime.escalation import Escalate
from agent_runtime.tools import tool

FIRST_DEADLINE_SECONDS = 600


@tool(approval="always", approvers=["role:Reviewers"])
def publish(text: Annotated[str, Field(min_length=1)]) -> dict:
    """Publish a text (a reviewer decides; not the owner, unless it was escalated to a role they hold)."""
    return {"published": text}


reviewed = AgentDefinition(
    name="reviewed", description="Publishes; a publication nobody reviewed in time goes to a supervisor.",
    instructions="You publish.", tools=[publish], approval_timeout_seconds=FIRST_DEADLINE_SECONDS,
    on_approval_timeout=Escalate(to="role:Supervisors", timeout_seconds=3600, then="reject"),
)
