"""`mcp_assistant`: the demo agent's weather tool plus every tool of an MCP server - served only when the
`MCP_EXAMPLE_URL` setting names a Streamable HTTP MCP server (so `make run` stays offline and unchanged).

    MCP_EXAMPLE_URL=https://tools.example.com/mcp     # required: the server
    MCP_EXAMPLE_API_KEY=...                           # optional: sent as the X-Api-Key header
    MCP_EXAMPLE_SCOPE=api://tools/.default            # optional: Entra ID bearer token (the app's managed identity)

Every MCP tool waits for a person's approval (remote tools are someone else's code) except those named in
`MCP_EXAMPLE_TRUSTED_TOOLS` (comma-separated).
"""

from __future__ import annotations

import os

from agent_runtime.agents import AgentDefinition
from agent_runtime.mcp import McpServer

from .assistant import get_weather

if os.environ.get("MCP_EXAMPLE_URL"):
    _trusted = [name.strip() for name in os.environ.get("MCP_EXAMPLE_TRUSTED_TOOLS", "").split(",") if name.strip()]
    mcp_assistant = AgentDefinition(
        name="mcp_assistant",
        description="Answers with the weather tool and the tools of the MCP server named by MCP_EXAMPLE_URL.",
        instructions="You are a helpful assistant. Use the tools you are given when they help.",
        tools=[
            get_weather,
            McpServer(
                name="example",
                url_setting="MCP_EXAMPLE_URL",  # read when a run starts, like the secrets below
                header_settings={"X-Api-Key": "MCP_EXAMPLE_API_KEY"} if os.environ.get("MCP_EXAMPLE_API_KEY") else {},
                credential_scope=os.environ.get("MCP_EXAMPLE_SCOPE") or None,
                approval={"*": "always", **{name: "never" for name in _trusted}},
                timeout_seconds=60,
            ),
        ],
    )
