"""The agents the end-to-end tests talk to."""

from __future__ import annotations

from agent_runtime.agents import AgentDefinition
from agent_runtime.escalation import Escalate
from agent_runtime.spend import RunBudget
from fixture_agents.tools import big_result, lookup, send_email, slow_step, transfer

helper = AgentDefinition(
    name="helper",
    description="Test agent: lookups, emails and transfers (both approved by a person), big results, a slow step.",
    instructions="You are a test agent.",
    tools=[lookup, send_email, transfer, big_result, slow_step],
)

strict = AgentDefinition(
    name="strict",
    description="Test agent whose run fails when an approval is not given in time.",
    instructions="You are a strict test agent.",
    tools=[lookup, send_email],
    approval_timeout_seconds=600,
    on_approval_timeout="fail",
)

escalating = AgentDefinition(
    name="escalating",
    description="Test agent whose undecided approvals go to supervisors after 10 minutes; the run fails an hour later.",
    instructions="You are a test agent.",
    tools=[lookup, send_email],
    approval_timeout_seconds=600,
    on_approval_timeout=Escalate(to="role:Supervisors", timeout_seconds=3600, then="fail"),
)

frugal = AgentDefinition(
    name="frugal",
    description="Test agent with a budget: at most 3 model calls, 1000 tokens and a cost of 0.5 per run.",
    instructions="You are a frugal test agent.",
    tools=[lookup],
    budget=RunBudget(max_model_calls=3, max_total_tokens=1000, max_cost=0.5),
)
