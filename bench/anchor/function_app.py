"""The anchor: Microsoft Agent Framework's `AgentFunctionApp` serving an agent equivalent to our `worker`.

Benchmark-only (bench/requirements-anchor.txt); the app itself never imports Agent Framework. Same model endpoint
(our scripted server, via OPENAI_BASE_URL), same instructions, the same `fetch_blob` tool (same results).
"""

import os

import azure.functions as func
from agent_framework.openai import OpenAIChatCompletionClient
from agent_framework_azurefunctions import AgentFunctionApp


def fetch_blob(index: int, size: int) -> dict:
    """Return `size` bytes of deterministic text for item `index`."""
    pattern = f"[item {index}] "
    return {"index": index, "data": (pattern * (size // len(pattern) + 1))[:size]}


client = OpenAIChatCompletionClient(
    model=os.environ.get("OPENAI_MODEL", "scripted"),
    api_key=os.environ.get("OPENAI_API_KEY", "not-used"),
    base_url=os.environ["OPENAI_BASE_URL"],
)
worker = client.as_agent(
    name="Worker",
    instructions="Do what the user asks with your tools, then answer briefly.",
    tools=[fetch_blob],
)
app = AgentFunctionApp(agents=[worker], http_auth_level=func.AuthLevel.ANONYMOUS)
