"""Talking to an MCP server with the official `mcp` SDK: one short connection per operation, retried while the
server cannot be reached.

A connection per operation keeps activities independent (any worker, any retry, no session to lose when a server
restarts) at the price of a handshake per call. A call that is retried carries the same idempotency key in its
`_meta`, so a server that deduplicates by it applies the effect once even when the first answer was lost.

What a server answers is bounded (`answers.MAX_ANSWER_BYTES` per operation, all pages of a listing together, over HTTP
and stdio): the SDK reads an answer whole into memory and then parses it on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult
from mcp_types import Tool as RemoteTool

from ..content_sizes import cut_text
from ..peer_text import peer_text
from ..tools import ToolReportedError
from .answers import AnswerBudget, McpAnswerTooLargeError
from .config import McpConfigurationError, McpServer
from .server_stderr import server_stderr
from .skips import SkipCode

logger = logging.getLogger(__name__)

T = TypeVar("T")
IDEMPOTENCY_META_KEY = "idempotencyKey"
_MAX_LIST_PAGES = 100
# A JSON-RPC error's message is the server's text, told to the model and stored as the call's error: a few lines.
MAX_PROTOCOL_ERROR_BYTES = 16 * 1024


class McpUnavailableError(ToolReportedError):
    """The server could not be reached (or did not answer in time) on any attempt; `code` says which (the last
    attempt's failure), as discovery records a skipped server (`skips.SkipCode`)."""

    def __init__(self, message: str, code: SkipCode = "unreachable") -> None:
        super().__init__(message)
        self.code: SkipCode = code


class McpProtocolError(ToolReportedError):
    """The server answered with a protocol error (unknown tool, invalid parameters...), or an answer past what the
    client reads (`code`: `invalid_answer`, `too_many_pages`)."""

    def __init__(self, message: str, code: SkipCode = "invalid_answer") -> None:
        super().__init__(message)
        self.code: SkipCode = code


@asynccontextmanager
async def open_client(server: McpServer) -> AsyncIterator[Client]:
    """A connected `mcp.Client` for one operation (settings and tokens are resolved now, never earlier)."""
    budget = AnswerBudget()  # one per operation: each attempt of `with_server` opens a client of its own
    if server.command:
        params = StdioServerParameters(
            command=server.command, args=list(server.args), env=server.resolved_env() or None, cwd=server.cwd
        )
        with budget.for_stdio(), server_stderr(server.name) as errlog:  # its stderr: bounded, masked, logged
            transport = stdio_client(params, errlog=errlog)
            async with Client(transport, read_timeout_seconds=server.timeout_seconds, cache=None) as client:
                yield client
        return
    url = server.resolved_url()
    headers = await server.resolved_headers()
    timeout = httpx2.Timeout(server.timeout_seconds, read=server.timeout_seconds)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks={"response": [budget]}) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, read_timeout_seconds=server.timeout_seconds, cache=None) as client:
            yield client


async def with_server(server: McpServer, operation: Callable[[Client], Awaitable[T]], what: str) -> T:
    """Run `operation` on a fresh connection; retry (with backoff) while the server cannot be reached."""
    delay = server.retry_delay_seconds
    last: BaseException | None = None
    for attempt in range(1, server.attempts + 1):
        done, result = False, None
        try:
            with anyio.fail_after(server.timeout_seconds):
                async with open_client(server) as client:
                    result = await operation(client)
                    done = True
        except McpConfigurationError:
            raise
        except Exception as error:
            # Over HTTP the SDK turns an answer past the budget into a JSON-RPC error; over stdio it ends the
            # connection: a protocol error alike, not retried (the server would answer as much again).
            protocol_error = _find(error, McpAnswerTooLargeError) or _find(error, MCPError)  # not the closed connection
            if done:  # the answer arrived; only closing the connection failed
                logger.info("MCP server %r: closing the connection failed after %s", server.name, what)
            elif protocol_error is not None:
                # The server's text: masked and escaped before the cut (a secret cut in two is no longer recognised).
                told = cut_text(peer_text(str(protocol_error), server.url_credentials()), MAX_PROTOCOL_ERROR_BYTES)
                raise McpProtocolError(f"MCP server {server.name!r} refused {what}: {told}") from error
            else:
                last = error
                logger.warning(
                    "MCP server %r: %s failed (attempt %d/%d): %s",
                    server.name,
                    what,
                    attempt,
                    server.attempts,
                    _describe(error),
                )
        if done:
            return result  # type: ignore[return-value]
        if attempt < server.attempts:
            await asyncio.sleep(delay)
            delay *= 2
    raise McpUnavailableError(
        f"MCP server {server.name!r} is unavailable: {what} failed {server.attempts} times"
        f" ({_describe(last) if last else 'no answer'}).",
        "timeout" if last is not None and _timed_out(last) else "unreachable",
    )


async def list_remote_tools(server: McpServer) -> list[RemoteTool]:
    """Every tool the server lists (all pages), or `McpProtocolError` when a page past `_MAX_LIST_PAGES` is still
    announced: a partial list would leave tools out unnoticed, so it is not used (discovery fails as for a server
    that cannot be listed)."""

    async def operation(client: Client) -> tuple[list[RemoteTool], str | None]:
        tools: list[RemoteTool] = []
        cursor: str | None = None
        for _ in range(_MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools, cursor

    tools, cursor = await with_server(server, operation, "listing its tools")
    if cursor:  # not retried: the server would list as many pages again
        raise McpProtocolError(
            f"MCP server {server.name!r} lists its tools in more than {_MAX_LIST_PAGES} pages; a partial list is not"
            f" used ({len(tools)} tools in the first {_MAX_LIST_PAGES} pages)",
            "too_many_pages",
        )
    return tools


async def call_remote_tool(
    server: McpServer, name: str, arguments: dict[str, Any], idempotency_key: str
) -> CallToolResult:
    """Call one tool; the idempotency key travels in the request's `_meta` on every attempt."""

    async def operation(client: Client) -> CallToolResult:
        # The SDK checks a result against the tool's `outputSchema`: it lists the tools again for it (a fresh
        # connection knows none), validates with a plain jsonschema validator on the event loop (unbounded patterns
        # and branches of a hostile schema) and raises on a mismatch as if the connection were lost (the call would
        # be made again). The result reaches the model as the server's text; nothing here relies on its shape.
        client.session.validate_tool_result = _accept_result  # type: ignore[method-assign]
        return await client.call_tool(name, arguments, meta={IDEMPOTENCY_META_KEY: idempotency_key})

    return await with_server(server, operation, f"calling tool {name!r}")


async def _accept_result(name: str, result: CallToolResult) -> None:
    """`ClientSession.validate_tool_result` for our calls: no check (see `call_remote_tool`)."""


def _find(error: BaseException, kind: type[BaseException]) -> Any:
    """`error` or the first exception of that kind inside it (task groups wrap errors in ExceptionGroups)."""
    if isinstance(error, kind):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _find(inner, kind)
            if found is not None:
                return found
    cause = error.__cause__
    return _find(cause, kind) if cause is not None and cause is not error else None


def _timed_out(error: BaseException) -> bool:
    """Whether the attempt failed for want of an answer in time (our deadline, or the HTTP client's)."""
    return _find(error, TimeoutError) is not None or _find(error, httpx2.TimeoutException) is not None


def _describe(error: BaseException) -> str:
    """The innermost error's type and message, without URLs or headers (they may carry secrets)."""
    if _timed_out(error):
        return "timed out"
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return type(error).__name__
