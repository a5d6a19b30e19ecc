"""What one operation reads of an MCP server's answers: at most `MAX_ANSWER_BYTES` in all (the handshake, every page
of a listing, a call's answer, notifications), over Streamable HTTP and stdio alike.

The `mcp` SDK reads an answer whole into memory before parsing it: over HTTP a JSON body or an SSE event, over stdio
a line of the server's output (a server that never ends its line grew that buffer without limit). `AnswerBudget`
counts what is read on the way in - decoded bytes of each HTTP response (a compressed answer cannot expand past it),
the bytes of a stdio server's output - and raises `McpAnswerTooLargeError` past the limit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import httpx2
import mcp.client.stdio as sdk_stdio
from anyio.abc import ByteReceiveStream
from anyio.streams.text import TextReceiveStream

# Twice the largest record a session stores (`MAX_ITEM_BYTES`): a listing or a tool answer past it could not be stored.
MAX_ANSWER_BYTES = 4 * 1024 * 1024


class McpAnswerTooLargeError(httpx2.StreamError):
    """The server's answers passed `MAX_ANSWER_BYTES`. A `StreamError`, so over HTTP the SDK answers the request with
    a JSON-RPC error at once (an SSE stream is ended, and its request abandoned), instead of a transport failure to
    retry; over stdio it ends the connection, and `with_server` reports it the same way."""


class AnswerBudget:
    """At most `limit` bytes read of a server's answers in one operation (one budget per connection)."""

    def __init__(self, limit: int = MAX_ANSWER_BYTES) -> None:
        self.limit = limit
        self.read = 0

    def count(self, size: int) -> None:
        self.read += size
        if self.read > self.limit:
            raise McpAnswerTooLargeError(f"the server's answers are larger than {self.limit} bytes")

    async def __call__(self, response: httpx2.Response) -> None:
        """The HTTP client's response hook. Every way the SDK reads a body (`aread`, the SSE and text iterators)
        decodes through `aiter_bytes`: it is wrapped to count what is decoded, not what was sent."""
        decoded_chunks = response.aiter_bytes

        async def bounded(chunk_size: int | None = None) -> AsyncIterator[bytes]:
            async for chunk in decoded_chunks(chunk_size):
                self.count(len(chunk))
                yield chunk

        response.aiter_bytes = bounded  # type: ignore[method-assign]

    @contextmanager
    def for_stdio(self) -> Iterator[None]:
        """Bound the output of the stdio servers started in this context (their reader tasks inherit it)."""
        token = _stdio_budget.set(self)
        try:
            yield
        finally:
            _stdio_budget.reset(token)


# ------------------------------------------------------------------------------------------------------------ stdio

_stdio_budget: ContextVar[AnswerBudget | None] = ContextVar("mcp_stdio_answer_budget", default=None)


class _CountedBytes(ByteReceiveStream):
    """A server's stdout, counted against the budget as it is read."""

    def __init__(self, stream: ByteReceiveStream, budget: AnswerBudget) -> None:
        self._stream = stream
        self._budget = budget

    async def receive(self, max_bytes: int = 65536) -> bytes:
        chunk = await self._stream.receive(max_bytes)
        try:
            self._budget.count(len(chunk))
        except McpAnswerTooLargeError:
            # The reader's shielded drain reads the pipe until it ends, and only then does the error end the
            # connection: a server that keeps its stdout open held the operation until its timeout. Closed, the
            # drain ends at once (the server gets a broken pipe, and is stopped as usual).
            await self._stream.aclose()
            raise
        return chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class _BudgetedTextReceiveStream(TextReceiveStream):
    """The SDK's stdio reader decodes the server's stdout through `TextReceiveStream` and splits it into lines,
    buffering a line until it ends. Under a budget the bytes it reads are counted first: past the budget the reader
    fails, which ends the connection, instead of buffering on."""

    def __post_init__(self, encoding: str, errors: str) -> None:
        super().__post_init__(encoding, errors)
        budget = _stdio_budget.get()
        if budget is not None:
            self.transport_stream = _CountedBytes(self.transport_stream, budget)  # type: ignore[arg-type]


# The SDK's stdio client has no limit nor hook for one; the reader it builds is the one place to bound. A test starts
# a stdio server that writes past the budget (`test_mcp_in_process`), so an SDK that stops reading through it fails.
sdk_stdio.TextReceiveStream = _BudgetedTextReceiveStream  # type: ignore[misc]
