"""Agents with MCP servers for the end-to-end tests (`AGENTS_PACKAGE=fixture_mcp_agents`).

The server's URL, its API key and the stdio server's state folder are app settings (`E2E_MCP_URL`, `E2E_MCP_KEY`,
`E2E_MCP_STATE`), read when a run contacts the server - as a deployed app reads its secrets.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agent_runtime.agents import AgentDefinition
from agent_runtime.mcp import McpServer
from agent_runtime.tools import tool

SERVER_SCRIPT = str(Path(__file__).resolve().parent.parent / "mcp_test_server.py")


@tool
def echo(text: str) -> str:
    """A Python tool whose name the MCP server's `echo` collides with."""
    return f"python echo: {text}"


remote = McpServer(
    name="tools",
    url_setting="E2E_MCP_URL",
    header_settings={"X-Api-Key": "E2E_MCP_KEY"},
    headers={"X-Team": "e2e"},
    approval={"transfer": "always", "record": "never", "fail": "never", "picture": "never", "echo": "never"},
    timeout_seconds=20,
    attempts=8,
    retry_delay_seconds=0.2,
)

mcp_helper = AgentDefinition(
    name="mcp_helper",
    description="Test agent with the tools of an MCP server on loopback (Streamable HTTP).",
    instructions="You are a test agent.",
    tools=[echo, remote],
)

mcp_fragile = AgentDefinition(
    name="mcp_fragile",
    description="Test agent whose MCP server is tried twice, without a pause, before a call is given up.",
    instructions="You are a test agent.",
    tools=[echo, remote.model_copy(update={"attempts": 2, "retry_delay_seconds": 0})],
)

mcp_stdio = AgentDefinition(
    name="mcp_stdio",
    description="Test agent with the tools of an MCP server it starts over stdio.",
    instructions="You are a test agent.",
    tools=[
        McpServer(
            name="local",
            command=sys.executable,
            args=[SERVER_SCRIPT, "stdio"],
            env_settings={"MCP_TEST_STATE": "E2E_MCP_STATE"},
            allowed_tools=["echo", "record"],
            approval="never",
            timeout_seconds=30,
        )
    ],
)

mcp_transfer_only = AgentDefinition(
    name="mcp_transfer_only",
    description="Test agent that allows one tool of its (required) MCP server.",
    instructions="You are a test agent.",
    tools=[echo, remote.model_copy(update={"allowed_tools": ["transfer"]})],
)

mcp_transfer_optional = AgentDefinition(
    name="mcp_transfer_optional",
    description="Test agent that allows one tool of an optional MCP server.",
    instructions="You are a test agent.",
    tools=[echo, remote.model_copy(update={"allowed_tools": ["transfer"], "required": False})],
)

# A second server next to `tools`, at the URL of `E2E_MCP_EXTRA_URL` (unreachable, answering garbage, 120 pages, ...):
# one attempt, with time enough for a long listing on a loaded machine (the deadline covers all its pages).
extra = McpServer(
    name="extra",
    url_setting="E2E_MCP_EXTRA_URL",
    approval="never",
    timeout_seconds=60,
    attempts=1,
    retry_delay_seconds=0,
    required=False,
)
# The same for a server that never answers: given up after a second (real time: the MCP client's own deadline).
hasty_extra = extra.model_copy(update={"timeout_seconds": 1})

def _with_second_server(name: str, server: McpServer, what: str) -> AgentDefinition:
    return AgentDefinition(
        name=name,
        description=f"Test agent with its MCP server and {what}.",
        instructions="You are a test agent.",
        tools=[echo, remote, server],
    )


def _required(server: McpServer) -> McpServer:
    return server.model_copy(update={"required": True})


mcp_with_extra = _with_second_server("mcp_with_extra", extra, "an optional second one")
mcp_extra_required = _with_second_server("mcp_extra_required", _required(extra), "a required second one")
mcp_with_hasty_extra = _with_second_server(
    "mcp_with_hasty_extra", hasty_extra, "an optional second one given a second"
)
mcp_hasty_extra_required = _with_second_server(
    "mcp_hasty_extra_required", _required(hasty_extra), "a required second one given a second"
)
