"""Framing of `StreamingMessage`s between devhost and a worker process: a 4-byte big-endian length, then the message.

Azure's host and worker exchange the same messages over one bidirectional gRPC stream; devhost carries them over a
loopback TCP connection instead (no gRPC server to run), one message per frame, in both directions.
"""

from __future__ import annotations

import socket
from typing import Any

from devhost.worker import rpc

HEADER_BYTES = 4
MAX_FRAME_BYTES = 256 * 1024 * 1024  # far above any payload Durable or HTTP allow; a guard against a corrupt stream


class WireError(Exception):
    """The peer sent something that is not a frame of this protocol."""


def encode(message: Any) -> bytes:
    body = message.SerializeToString()
    return len(body).to_bytes(HEADER_BYTES, "big") + body


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(min(size - len(chunks), 1 << 20))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def read_message(sock: socket.socket) -> Any | None:
    """The next `StreamingMessage`, or None when the peer closed the connection."""
    try:
        header = _read_exactly(sock, HEADER_BYTES)
        if header is None:
            return None
        size = int.from_bytes(header, "big")
        if size > MAX_FRAME_BYTES:
            raise WireError(f"frame of {size} bytes exceeds {MAX_FRAME_BYTES}")
        body = _read_exactly(sock, size)
    except OSError:
        return None
    if body is None:
        return None
    try:
        return rpc.StreamingMessage.FromString(body)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise WireError(f"invalid frame: {exc}") from exc
