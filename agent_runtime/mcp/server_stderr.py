"""What a stdio MCP server writes to stderr: read by the host, cut to a bound, masked, then logged.

The SDK hands a stdio server the host's own stderr by default: a server that prints its environment (the tokens the
app gave it among it) or floods its stderr reached the Functions host's logs unmasked and unbounded. Here the server
gets the write end of a pipe of its own; a thread reads it, logs each line through `redact` (cut to
`MAX_LINE_CHARS`, at most `MAX_LOGGED_CHARS` an operation, then one line saying how much was dropped) and reads on
past the bound, dropping the rest: a server blocked on a full pipe would hang.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from ..peer_text import peer_text

logger = logging.getLogger(__name__)

MAX_LINE_CHARS = 2_000
MAX_LOGGED_CHARS = 64_000
# After the operation, how long the reader waits for the rest (a server's child that keeps the pipe open would
# otherwise hold the thread).
_DRAIN_SECONDS = 2.0
_CHUNK_BYTES = 65_536


class _StderrLog:
    """The lines of one server's stderr, logged until the bound, then counted."""

    def __init__(self, server_name: str) -> None:
        self._server = server_name
        self._pending = b""
        self._rest_of_line = False  # the end of a line logged by its start is still to come: drop it
        self._logged = 0
        self._dropped = 0

    def feed(self, data: bytes) -> None:
        if self._rest_of_line:
            # Logged as a line of its own, it would start mid-line: a secret across the read's end showed its end.
            end = data.find(b"\n")
            if end < 0:
                return
            data, self._rest_of_line = data[end + 1 :], False
        lines = (self._pending + data).split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            self._line(line)
        if len(self._pending) > MAX_LINE_CHARS * 4:  # a line without end: log its start, drop the rest
            self._line(self._pending)
            self._pending, self._rest_of_line = b"", True

    def close(self) -> None:
        if self._pending:
            self._line(self._pending)
            self._pending = b""
        if self._dropped:
            logger.info("MCP server %r: %d more characters of its stderr not logged", self._server, self._dropped)

    def _line(self, raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace").rstrip("\r")
        if not text.strip():
            return
        if self._logged >= MAX_LOGGED_CHARS:
            self._dropped += len(text)
            return
        text = peer_text(text)  # before the cut: a secret cut in two would not be recognised
        shown = text[:MAX_LINE_CHARS] + (" ..." if len(text) > MAX_LINE_CHARS else "")
        self._logged += len(shown)
        logger.info("MCP server %r stderr: %s", self._server, shown)


def _read(fd: int, log: _StderrLog, done: threading.Event) -> None:
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], _DRAIN_SECONDS if done.is_set() else 0.5)
            if not ready:
                if done.is_set():
                    return  # the operation ended and nothing more came: a lingering writer is not waited for
                continue
            data = os.read(fd, _CHUNK_BYTES)
            if not data:
                return  # every writer closed its end
            log.feed(data)
    finally:
        log.close()
        os.close(fd)


@contextmanager
def server_stderr(server_name: str) -> Iterator[TextIO]:
    """The file a stdio server's stderr goes to (`stdio_client(..., errlog=...)`) for one operation."""
    read_fd, write_fd = os.pipe()
    done = threading.Event()
    reader = threading.Thread(
        target=_read, args=(read_fd, _StderrLog(server_name), done), name=f"mcp-stderr-{server_name}", daemon=True
    )
    reader.start()
    errlog = os.fdopen(write_fd, "w")
    try:
        yield errlog
    finally:
        errlog.close()  # the server holds its own copy until it exits: then the reader reaches the end
        done.set()
