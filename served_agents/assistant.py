"""`assistant`: the demo agent. Weather needs no approval; sending an email always waits for a person.

With no model configured, the offline demo brain (scripted model server) drives it: it calls `get_weather` when
asked about the weather and `send_email` when asked to email someone.
"""

from __future__ import annotations

import hashlib
from typing import Annotated

from pydantic import Field

from agent_runtime.agents import AgentDefinition
from agent_runtime.tools import ToolContext, tool

_CONDITIONS = ("sunny", "cloudy", "rainy", "windy", "snowy", "foggy")


@tool
def get_weather(city: Annotated[str, Field(min_length=1, max_length=100, description="City name, e.g. Paris")]) -> dict:
    """Get the current weather for a city."""
    # Deterministic demo data: the same city always gives the same weather (no external service in the demo).
    digest = int(hashlib.sha256(city.strip().lower().encode()).hexdigest(), 16)
    return {"city": city, "condition": _CONDITIONS[digest % len(_CONDITIONS)], "temperature_c": digest % 35 - 5}


@tool(approval="always")
async def send_email(
    to: Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$", description="Recipient email address")],
    subject: Annotated[str, Field(min_length=1, max_length=200)],
    body: Annotated[str, Field(max_length=10_000)],
    context: ToolContext,
) -> dict:
    """Send an email. The demo records it in the session store (its outbox) instead of sending it."""
    email = {"to": to, "subject": subject, "body": body}
    stored, created = await context.record_effect_once("email", email)
    return {"status": "sent" if created else "already_sent", "to": stored["to"], "subject": stored["subject"]}


assistant = AgentDefinition(
    name="assistant",
    description="A helpful assistant that can look up the weather and send emails (with approval).",
    instructions=(
        "You are a helpful assistant. Use get_weather for weather questions. Use send_email to email people; "
        "a person approves every email before it is sent. Answer briefly."
    ),
    tools=[get_weather, send_email],
)
