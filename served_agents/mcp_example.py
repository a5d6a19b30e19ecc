"""`mcp_assistant`: the demo agent's weather tool plus every tool of an MCP server - served only when the
`MCP_EXAMPLE_URL` setting names a Streamable HTTP MCP server (so `make run` stays offline and unchanged).

    MCP_EXAMPLE_URL=https://tools.example.com/mcp     # required: the server
    MCP_EXAMPLE_API_KEY=...                           # optional: sent as the X-Api-Key header
    MCP_EXAMPLE_SCOPE=api://tools/.default            # optional: Entra ID bearer token (the app's managed identity)

Every MCP tool waits for a person's approval (remote tools are someone else's code) except those named in
`MCP_EXAMPLE_TRUSTED_TOOLS` (comma-separated).
"""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent_runtime.agents import AgentDefinition
from agent_runtime.mcp import McpServer

from .assistant import get_weather


class McpExampleSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, env_ignore_empty=True)

    url: str | None = Field(default=None, validation_alias="MCP_EXAMPLE_URL")
    api_key: SecretStr | None = Field(default=None, validation_alias="MCP_EXAMPLE_API_KEY")
    scope: str | None = Field(default=None, validation_alias="MCP_EXAMPLE_SCOPE")
    trusted_tools: str = Field(default="", validation_alias="MCP_EXAMPLE_TRUSTED_TOOLS")

    def trusted(self) -> list[str]:
        return [name.strip() for name in self.trusted_tools.split(",") if name.strip()]


_settings = McpExampleSettings()
if _settings.url:
    mcp_assistant = AgentDefinition(
        name="mcp_assistant",
        description="Answers with the weather tool and the tools of the MCP server named by MCP_EXAMPLE_URL.",
        instructions="You are a helpful assistant. Use the tools you are given when they help.",
        tools=[
            get_weather,
            McpServer(
                name="example",
                url_setting="MCP_EXAMPLE_URL",  # read when a run starts, like the secrets below
                header_settings={"X-Api-Key": "MCP_EXAMPLE_API_KEY"} if _settings.api_key is not None else {},
                credential_scope=_settings.scope,
                approval={"*": "always", **{name: "never" for name in _settings.trusted()}},
                timeout_seconds=60,
            ),
        ],
    )
