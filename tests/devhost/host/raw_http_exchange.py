"""One HTTP/1.1 exchange over a raw socket, for requests an HTTP client would refuse to send (bytes that are not
UTF-8, heads over a server's limits): the bytes go out exactly as written; the answer is read until the host closes
the connection (send `Connection: close`)."""

from __future__ import annotations

import socket

from devhost.testing import InProcessHost

Exchange = tuple[int, dict[str, str], bytes]


def exchange(host: InProcessHost, request: bytes) -> Exchange:
    """Send `request`; the answer's status, headers (names lower-cased) and body (de-chunked)."""
    port = int(host.base_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    raw_head, _, raw_body = received.partition(b"\r\n\r\n")
    lines = raw_head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    if headers.get("transfer-encoding", "").lower() == "chunked":  # a worker's streamed answer
        raw_body = _dechunked(raw_body)
    return int(lines[0].split()[1]), headers, raw_body


def _dechunked(data: bytes) -> bytes:
    body = b""
    while True:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return body
        body, data = body + data[:size], data[size + 2:]


def assert_kestrel_refusal(answer: Exchange, status: int) -> None:
    """Kestrel's answer to a request it refuses before routing: the status, no body, the connection closed."""
    got, headers, body = answer
    assert (got, body) == (status, b"")
    assert headers.get("content-length") == "0"
    assert headers.get("connection", "").lower() == "close"
