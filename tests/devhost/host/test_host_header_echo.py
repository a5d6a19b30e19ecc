"""A request devhost cannot read (a header or request line over aiohttp's limits) is a 400 that never quotes what was
sent: with an oversized `Authorization` header, aiohttp's own answer (and log line) carried the start of the
credential. Raw sockets: an HTTP client would refuse to send such a request."""

import logging
import socket

import pytest

from devhost.http.server import UNREADABLE_REQUEST_TEXT
from devhost.testing import InProcessHost

pytestmark = pytest.mark.devhost_app("tests/devhost/apps/http_basic")
SECRET = "Bearer sk-live-0123456789abcdef"


def _raw(host: InProcessHost, request: bytes) -> bytes:
    port = int(host.base_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /api/hello HTTP/1.1\r\nHost: a\r\nAuthorization: " + SECRET.encode() + b"A" * 9000 + b"\r\n\r\n",
        b"GET /api/hello?key=" + SECRET.encode().replace(b" ", b"-") + b"A" * 9000 + b" HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /api/hello HTTP/1.1\r\nHost: a\r\nAuthorization " + SECRET.encode() + b"\r\n\r\n",  # no colon
    ],
    ids=["header too long", "request line too long", "malformed header"],
)
def test_an_unreadable_request_is_a_400_that_echoes_nothing(
    devhost: InProcessHost, request_bytes: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    response = _raw(devhost, request_bytes)
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.") and b" 400 " in head.split(b"\r\n")[0], response[:200]
    assert body.decode() == UNREADABLE_REQUEST_TEXT
    leaked = SECRET.split()[1][:10]
    assert leaked.encode() not in response
    assert leaked not in caplog.text
    assert devhost.client.get("/api/hello", params={"name": "x"}).status_code == 200  # the host still serves
