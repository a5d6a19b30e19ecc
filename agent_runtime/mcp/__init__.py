"""Tools from Model Context Protocol servers (the official `mcp` SDK as client; Streamable HTTP and stdio).

    AgentDefinition(name="assistant", tools=[get_weather, McpServer(name="files", url="https://...")])

A run lists the servers' tools once (an activity in a durable run) and records the list with the run, so every
replay, retry and restart offers the model the same tools with the same schemas. Each call is an ordinary tool step:
approval policy, arguments checked against the server's input schema, the call's idempotency key sent in `_meta`,
the result stored in the session, `isError` and an unreachable server reported to the model as tool errors.
"""

from ..lazy import lazy_getattr
from .config import McpConfigurationError, McpServer

# The SDK takes ~0.6 s to import: only apps whose agents use MCP servers pay for it (on first use).
_LAZY = {
    "IDEMPOTENCY_META_KEY": "connection",
    "McpProtocolError": "connection",
    "McpUnavailableError": "connection",
    "DiscoveredTools": "discovery",
    "McpDiscoveryError": "discovery",
    "assign_names": "discovery",
    "discover_tools": "discovery",
    "McpArguments": "tools",
    "McpTool": "tools",
    "McpToolSpec": "tools",
}


__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "IDEMPOTENCY_META_KEY",
    "DiscoveredTools",
    "McpArguments",
    "McpConfigurationError",
    "McpDiscoveryError",
    "McpProtocolError",
    "McpServer",
    "McpTool",
    "McpToolSpec",
    "McpUnavailableError",
    "assign_names",
    "discover_tools",
]
