"""The `expert_panel` agents: three specialists asked at once, and a chair who merges their opinions."""

from __future__ import annotations

from agent_runtime.agents import AgentDefinition


def _expert(name: str, field: str) -> AgentDefinition:
    return AgentDefinition(
        name=name,
        description=f"Gives a short expert opinion from the {field} point of view.",
        instructions=f"You are an expert in {field}. Give a short opinion on the question from that point of view.",
    )


legal_expert = _expert("legal_expert", "law and compliance")
finance_expert = _expert("finance_expert", "finance and cost")
technical_expert = _expert("technical_expert", "engineering and technology")

panel_chair = AgentDefinition(
    name="panel_chair",
    description="Merges the opinions of a panel of experts into one recommendation.",
    instructions=(
        "You chair a panel of experts. Merge their opinions into one short recommendation that names where they "
        "agree and where they disagree."
    ),
)
