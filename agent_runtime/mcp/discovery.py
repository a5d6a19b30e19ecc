"""Discovery: which tools of an agent's MCP servers a run offers, and under which names (done once per run).

Names: a tool keeps the server's name unless that name is taken (by a Python tool of the agent or a tool of another
server), then it becomes `server__tool`. Characters OpenAI refuses in tool names become `_`. The result only depends
on what the servers listed, and it is recorded, so a run's names never change.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections import Counter
from collections.abc import Iterable, Sequence

from mcp_types import Tool as RemoteTool
from pydantic import BaseModel, Field

from ..check_threads import check_off_loop
from ..json_schemas import InvalidSchemaError, SchemaRefusedError, check_schema
from ..peer_text import peer_text
from .config import McpConfigurationError, McpServer
from .connection import McpProtocolError, McpUnavailableError, list_remote_tools
from .skips import MAX_SKIP_MESSAGE_CHARS, SkipCode, SkippedServer
from .tools import MAX_DESCRIPTION_CHARS, McpToolSpec

logger = logging.getLogger(__name__)

_INVALID = re.compile(r"[^A-Za-z0-9_-]")
MAX_TOOLS = 128  # OpenAI's limit of tools per request
MAX_RECORDED_BYTES = 1024 * 1024
"""The run's list as recorded (UTF-8 JSON) in its store record, one item of at most 2 MB (Cosmos): 128 tools of up
to 64,000-character schemas would be 8 MB."""
_MAX_REASON_CHARS = 300  # a left-out tool's name and reason as logged and recorded: the server's text (an error
# quotes its schema)
MAX_RECORDED_SKIPS = 50  # left-out tools a run records (its view shows them): each one is logged all the same


class McpDiscoveryError(RuntimeError):
    """A required server could not be reached (or is misconfigured) when the run listed its tools; `code` says why
    when one server is at fault (`skips.SkipCode`)."""

    def __init__(self, message: str, code: SkipCode | None = None) -> None:
        super().__init__(message)
        self.code = code


class SkippedTool(BaseModel):
    """A listed tool the run does not offer: its input schema is invalid or refused (`reason`)."""

    server: str
    tool: str
    reason: str


class DiscoveredTools(BaseModel):
    tools: list[McpToolSpec] = Field(default_factory=list)
    skipped_servers: list[SkippedServer] = Field(
        default_factory=list, description="optional servers that could not be listed, and why"
    )
    skipped_tools: list[SkippedTool] = Field(default_factory=list, description="tools left out for their schema")

    def names(self) -> list[str]:
        return [t.name for t in self.tools]

    def recorded_skips(self) -> list[dict[str, str]]:
        """The left-out tools as the run records them (JSON): the first `MAX_RECORDED_SKIPS`."""
        return [skipped.model_dump(mode="json") for skipped in self.skipped_tools[:MAX_RECORDED_SKIPS]]

    def recorded_server_skips(self) -> list[dict[str, str]]:
        """The left-out servers as the run records them (JSON): one per server of the agent at most."""
        return [skipped.model_dump(mode="json") for skipped in self.skipped_servers]


async def discover_tools(servers: Sequence[McpServer], taken_names: Iterable[str] = ()) -> DiscoveredTools:
    """List every server's tools (concurrently), keep the allowed ones and name them for the model."""
    listed = await asyncio.gather(*(list_remote_tools(server) for server in servers), return_exceptions=True)
    found: list[tuple[McpServer, str, str, dict]] = []
    skipped: list[SkippedServer] = []
    skipped_tools: list[SkippedTool] = []
    for server, outcome in zip(servers, listed, strict=True):
        if not isinstance(outcome, BaseException):
            try:  # off the loop: a large schema takes ~0.1 s to check
                usable, left_out = await check_off_loop(_usable_tools, server, outcome)
            except McpDiscoveryError as refused:
                outcome = refused  # more tools than a run offers: as a server that cannot be listed
            else:
                skipped_tools.extend(left_out)
                if usable or not left_out:
                    found.extend(usable)
                    continue
                # Every tool it allows was left out: the run would go on without the server, as if it were down.
                outcome = McpDiscoveryError(_none_offered(left_out), "no_usable_tools")
        if not isinstance(outcome, Exception):
            raise outcome
        # The run's error or record shows it, and the log: a server's protocol error quotes what it wrote (cut).
        reason = peer_text(str(outcome) or type(outcome).__name__, server.url_credentials())
        code = _skip_code(outcome)
        if server.required:
            raise McpDiscoveryError(f"MCP server {server.name!r} ({code}): {reason}", code) from outcome
        logger.warning("MCP server %r skipped for this run (%s): %s", server.name, code, reason)
        skipped.append(SkippedServer(server=server.name, code=code, message=reason[:MAX_SKIP_MESSAGE_CHARS]))
    taken_names = list(taken_names)
    if len(found) + len(taken_names) > MAX_TOOLS:
        raise McpDiscoveryError(
            f"the agent would offer {len(found) + len(taken_names)} tools; models take at most {MAX_TOOLS}"
            " (narrow the servers with allowed_tools)"
        )
    names = assign_names(taken_names, [(server.name, remote_name) for server, remote_name, _, _ in found])
    tools = [
        McpToolSpec(
            server=server.name,
            remote_name=remote_name,
            name=name,
            description=description[:MAX_DESCRIPTION_CHARS],  # all the model is shown: no more is recorded
            input_schema=schema,
        )
        for (server, remote_name, description, schema), name in zip(found, names, strict=True)
    ]
    _check_recorded_size(tools)
    return DiscoveredTools(tools=tools, skipped_servers=skipped, skipped_tools=skipped_tools)


def _skip_code(error: Exception) -> SkipCode:
    """Why a server could not be listed, as a stable code: the MCP errors carry theirs."""
    if isinstance(error, McpConfigurationError):
        return "misconfigured"
    if isinstance(error, McpDiscoveryError | McpUnavailableError | McpProtocolError) and error.code is not None:
        return error.code
    return "invalid_answer"  # nothing else is raised for a listing the client could not use


def _none_offered(left_out: Sequence[SkippedTool]) -> str:
    first = left_out[0]
    return (
        f"none of the tools it allows can be offered: {len(left_out)} left out for their input schema (the first,"
        f" '{first.tool}': its input schema {first.reason})"
    )


def _check_recorded_size(tools: Sequence[McpToolSpec]) -> None:
    """`McpDiscoveryError` unless the list fits in the run's record: past it, storing the list failed on every retry
    of the step, and the run never started."""
    size = len(json.dumps([t.model_dump(mode="json") for t in tools], ensure_ascii=False).encode())
    if size > MAX_RECORDED_BYTES:
        raise McpDiscoveryError(
            f"the tools' names, descriptions and schemas take {size} bytes; a run records at most"
            f" {MAX_RECORDED_BYTES} (narrow the servers with allowed_tools)"
        )


def _usable_tools(
    server: McpServer, listed: Sequence[RemoteTool]
) -> tuple[list[tuple[McpServer, str, str, dict]], list[SkippedTool]]:
    """The server's allowed tools with their checked schemas, and those left out for their schema. More than a run
    can offer is refused (`McpDiscoveryError`) before any schema is checked: a server may list thousands."""
    allowed = [remote for remote in listed if server.allows(remote.name)]
    if len(allowed) > MAX_TOOLS:
        raise McpDiscoveryError(
            f"it lists {len(allowed)} tools; models take at most {MAX_TOOLS} (narrow it with allowed_tools)",
            "too_many_tools",
        )
    usable: list[tuple[McpServer, str, str, dict]] = []
    left_out: list[SkippedTool] = []
    for remote in allowed:
        try:
            usable.append((server, remote.name, remote.description or "", _usable_schema(remote.input_schema)))
        except SchemaRefusedError as error:
            # Offered, such a tool would fail every call (or OpenAI would refuse every request offering it): the run
            # goes on with the server's other tools, and the deployment is told which tool and why.
            # The tool's name and the reason (which quotes the schema) are the server's text.
            credentials = server.url_credentials()  # not remembered secrets: a schema or name may echo the URL
            reason = peer_text(str(error), credentials)[:_MAX_REASON_CHARS]
            tool = peer_text(remote.name, credentials)[:_MAX_REASON_CHARS]
            skipped = SkippedTool(server=server.name, tool=tool, reason=reason)
            logger.warning(
                "MCP server %r: tool '%s' left out of this run: its input schema %s",
                skipped.server,
                skipped.tool,
                skipped.reason,
            )
            left_out.append(skipped)
    return usable, left_out


def _usable_schema(schema: dict | None) -> dict:
    """The tool's input schema, or `SchemaRefusedError` saying why the tool cannot be offered: an invalid schema
    (OpenAI refuses a request offering it), one that would make the app fetch a document (a `$ref` outside the
    schema), too large or deep to check (nothing is fetched), or not an object schema."""
    schema = dict(schema or {})
    if schema.get("type", "object") != "object":
        # OpenAI answers 400 to a request offering it (`parameters` must be an object schema).
        raise SchemaRefusedError(f"is of type {schema['type']!r}, not 'object'")
    try:
        check_schema(schema)
    except InvalidSchemaError as error:
        raise SchemaRefusedError(f"is invalid: {error}") from None
    except SchemaRefusedError as error:
        raise SchemaRefusedError(f"is refused: {error}") from None
    return schema


def assign_names(taken_names: Iterable[str], tools: Sequence[tuple[str, str]]) -> list[str]:
    """The model-facing name of each `(server, tool)`: the tool's own name, or `server__tool` when it collides."""
    taken = set(taken_names)
    bases = [_clean(tool) for _, tool in tools]
    counts = Counter(bases)
    names: list[str] = []
    for (server, tool), base in zip(tools, bases, strict=True):
        name = base if base not in taken and counts[base] == 1 else _clean(f"{server}__{tool}")
        unique, suffix = name, 2
        while unique in taken:  # still taken (two servers with one name after cleaning...): number it
            tail = f"_{suffix}"
            unique, suffix = name[: 64 - len(tail)] + tail, suffix + 1
        taken.add(unique)
        names.append(unique)
    return names


def _clean(name: str) -> str:
    return (_INVALID.sub("_", name) or "tool")[:64]
