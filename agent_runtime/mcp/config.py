"""`McpServer`: how an agent reaches a Model Context Protocol server, and which of its tools it may use.

    McpServer(name="files", url="https://files.example.com/mcp", header_settings={"X-Api-Key": "FILES_MCP_KEY"},
              allowed_tools=["read_file", "search"], approval={"read_file": "never", "search": "always"})
    McpServer(name="local", command="python", args=["-m", "my_server"])               # stdio

Secrets never live in the definition and never come from the model: header values, the URL and environment
variables of a stdio server can name app settings (`header_settings`, `url_setting`, `env_settings`), read when the
server is contacted; `credential_scope` sends a Microsoft Entra token (DefaultAzureCredential: the app's managed
identity on Azure) as `Authorization: Bearer ...`.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..named_settings import named_setting
from ..redaction import names_a_secret, remember_secret, url_secrets
from ..tools import ApprovalPolicy

SETTING_NAME = r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$"


class McpConfigurationError(RuntimeError):
    """The server cannot be contacted as configured (a named setting is missing, no credential)."""


class McpServer(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,32}$")
    """Names the server in tool names when two tools collide (`name__tool`) and in messages."""
    url: str | None = Field(default=None, pattern=r"^https?://")
    """Streamable HTTP endpoint (e.g. `https://host/mcp`)."""
    url_setting: str | None = Field(default=None, pattern=SETTING_NAME)
    """...or the app setting holding that URL (read when the server is contacted)."""
    command: str | None = None
    """stdio transport: the executable that runs the server (a local process per connection)."""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    env_settings: dict[str, str] = Field(default_factory=dict)
    """stdio: environment variable -> app setting whose value it gets."""
    cwd: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers sent as they are (nothing secret here: definitions are code)."""
    header_settings: dict[str, str] = Field(default_factory=dict)
    """HTTP header -> app setting whose value is sent (API keys, tokens)."""
    credential_scope: str | None = None
    """Send `Authorization: Bearer <token>` for this scope from DefaultAzureCredential (managed identity)."""
    credential: Any = Field(default=None, exclude=True, repr=False)
    """A credential object with `get_token(scope)` to use instead of DefaultAzureCredential."""
    allowed_tools: list[str] | None = None
    """Only these tools of the server (by the server's names); None: all it lists."""
    approval: ApprovalPolicy | dict[str, ApprovalPolicy] = "always"
    """For every tool, or per tool by the server's name (`"*"`: tools not named; without it the agent's default
    applies to them). Remote tools are someone else's code: they need approval unless the definition says so."""
    timeout_seconds: float = Field(default=60, gt=0)
    """Per attempt: connecting, listing tools or one tool call."""
    attempts: int = Field(default=3, ge=1, le=10)
    """Tries when the server cannot be reached (a call is retried with the same idempotency key)."""
    retry_delay_seconds: float = Field(default=1.0, ge=0)
    """Wait before the second try, doubling after each."""
    required: bool = True
    """A run whose discovery cannot reach this server fails; False: the run goes on without its tools."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        transports = [t for t in (self.url, self.url_setting, self.command) if t]
        if len(transports) != 1:
            raise ValueError("give exactly one of url, url_setting (Streamable HTTP) or command (stdio)")
        if self.command and (self.headers or self.header_settings or self.credential_scope):
            raise ValueError("headers and credential_scope apply to HTTP servers, not to a stdio command")
        if not self.command and (self.args or self.env or self.env_settings or self.cwd):
            raise ValueError("args, env, env_settings and cwd apply to a stdio command")
        for header in [*self.headers, *self.header_settings]:
            if not re.fullmatch(r"[A-Za-z0-9-]{1,64}", header):
                raise ValueError(f"invalid header name {header!r}")
        policies = self.approval.values() if isinstance(self.approval, dict) else [self.approval]
        for policy in policies:
            if policy not in ("never", "always") and not callable(policy):
                raise ValueError(f"approval must be 'never', 'always' or a predicate, got {policy!r}")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "streamable_http"

    def policy_for(self, tool_name: str) -> ApprovalPolicy | None:
        """The approval policy of one of this server's tools (None: the agent's default applies)."""
        if isinstance(self.approval, dict):
            return self.approval.get(tool_name, self.approval.get("*"))
        return self.approval

    def allows(self, tool_name: str) -> bool:
        return self.allowed_tools is None or tool_name in self.allowed_tools

    # ------------------------------------------------------------------------------------------------ connecting

    # A value read from a setting is remembered as a secret (masked in logs, spans and error bodies, as model keys
    # are) when it is one: a header or variable whose name is a credential's, a URL's userinfo and query tokens (the
    # HTTP client logs every request's URL). Not the rest: every remembered value is masked wherever it appears, and
    # each one slows `redact`. A URL written in the definition is remembered the same way: a server echoing its key
    # in an error reaches the logs in tracebacks too, which only the process-wide masking sees.

    def resolved_url(self, settings: Mapping[str, str] | None = None) -> str:
        url = self.url or _setting(settings, str(self.url_setting), f"the URL of MCP server {self.name!r}")
        _remember(url_secrets(url))
        return url

    def url_credentials(self) -> list[str]:
        """The credentials in the server's URL, masked in what the app shows of the server's text (remembered as well
        when the URL is resolved); none when its setting is not readable."""
        try:
            return [] if self.command else url_secrets(self.resolved_url())
        except McpConfigurationError:
            return []

    async def resolved_headers(self, settings: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = dict(self.headers)
        for header, setting in self.header_settings.items():
            value = _setting(settings, setting, f"header {header!r} of MCP server {self.name!r}")
            headers[header] = _remembered(header, value)
        if self.credential_scope:
            headers["Authorization"] = f"Bearer {await bearer_token(self.credential_scope, self.credential)}"
        return headers

    def resolved_env(self, settings: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(self.env)
        for variable, setting in self.env_settings.items():
            value = _setting(settings, setting, f"variable {variable!r} of MCP server {self.name!r}")
            env[variable] = _remembered(variable, value)
        return env


def _remember(secrets: list[str]) -> None:
    for secret in secrets:
        remember_secret(secret)


def _remembered(name: str, value: str) -> str:
    """A header's or variable's value, remembered whole when its name is a credential's, else its URL credentials."""
    _remember([value] if names_a_secret(name) else url_secrets(value))
    return value


def _setting(settings: Mapping[str, str] | None, name: str, what: str) -> str:
    value = named_setting(name) if settings is None else settings.get(name)
    if not value:
        raise McpConfigurationError(f"app setting {name!r} ({what}) is not set")
    return value


# ----------------------------------------------------------------------------------------------- Entra ID tokens

_credential_lock = threading.Lock()
_default_credential: Any = None
_tokens: dict[tuple[int, str], tuple[str, float]] = {}
_TOKEN_MARGIN_SECONDS = 300


async def bearer_token(scope: str, credential: Any = None) -> str:
    """A token for `scope`, cached until five minutes before it expires (one DefaultAzureCredential per process)."""
    if credential is None:
        credential = _shared_credential()
    key = (id(credential), scope)
    cached = _tokens.get(key)
    if cached is not None and cached[1] - _TOKEN_MARGIN_SECONDS > time.time():
        return cached[0]
    try:
        token = await asyncio.to_thread(credential.get_token, scope)
    except Exception as error:  # azure-identity's errors name what it tried; no secret is in them
        raise McpConfigurationError(f"no token for scope {scope!r}: {type(error).__name__}") from error
    _tokens[key] = (token.token, float(token.expires_on))
    return str(token.token)


def _shared_credential() -> Any:
    global _default_credential
    with _credential_lock:
        if _default_credential is None:
            from azure.identity import DefaultAzureCredential

            _default_credential = DefaultAzureCredential()
        return _default_credential
