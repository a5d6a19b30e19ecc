"""A request's head within Kestrel's limits reaches the function, one over them gets Kestrel's bare refusal
(devhost/http/request_limits.py; docs/devhost.md): a request line of at most 8 KB with its CRLF (else 414), at most
100 header lines and 32 KB of them (else 431), no limit on one header of its own (aiohttp's parser refused a
header over 8,190 bytes, which Azure's host passes: a large `Authorization` or `Cookie`). A refusal, or a
malformed request, never quotes what was sent (aiohttp's own 400, and its log line, carried the start of the
offending value: of an `Authorization` header, a credential). Raw sockets: an HTTP client would refuse to send
most of these requests (`raw_http_exchange`)."""

import json
import logging

import pytest
from raw_http_exchange import Exchange, assert_kestrel_refusal, exchange

from devhost.testing import InProcessHost

pytestmark = pytest.mark.devhost_app("tests/devhost/apps/http_basic")
SECRET = "Bearer sk-live-0123456789abcdef"
# What every request below sends besides its own headers (counted in the 32 KB and the 100 lines).
BASE_HEADERS = b"Host: a\r\nConnection: close\r\n"


def _raw(host: InProcessHost, request: bytes) -> Exchange:
    return exchange(host, request)


def _get(target: bytes, headers: bytes = b"") -> bytes:
    return b"GET " + target + b" HTTP/1.1\r\n" + BASE_HEADERS + headers + b"\r\n"


def _target_for_line_of(size: int) -> bytes:
    """A target whose request line (`GET <target> HTTP/1.1\\r\\n`) is `size` bytes."""
    prefix = b"/api/hello?name="
    return prefix + b"a" * (size - len(b"GET  HTTP/1.1\r\n") - len(prefix))


def _filler_for_section_of(size: int) -> bytes:
    """One `X-Fill` header making the header section (every line with its CRLF, the base headers included) `size`
    bytes."""
    rest = size - len(BASE_HEADERS) - len(b"X-Fill: \r\n")
    return b"X-Fill: " + b"f" * rest + b"\r\n"


def test_a_request_line_of_8_kb_is_served_and_one_byte_more_is_a_414(devhost: InProcessHost) -> None:
    status, _, body = _raw(devhost, _get(_target_for_line_of(8192)))
    assert (status, body[:8]) == (200, b"hello aa")
    assert_kestrel_refusal(_raw(devhost, _get(_target_for_line_of(8193))), 414)
    assert_kestrel_refusal(_raw(devhost, _get(_target_for_line_of(20_000))), 414)  # refused by the parser itself


def test_one_header_over_8_kb_reaches_the_function(devhost: InProcessHost) -> None:
    big = "b" * 20_000
    status, _, body = _raw(devhost, _get(b"/api/echo/x", b"X-Big: " + big.encode() + b"\r\n"))
    assert status == 200
    assert json.loads(body)["headers"]["x-big"] == big


def test_a_header_section_of_32_kb_is_served_and_one_byte_more_is_a_431(devhost: InProcessHost) -> None:
    status, _, body = _raw(devhost, _get(b"/api/echo/x", _filler_for_section_of(32 * 1024)))
    assert status == 200
    assert len(json.loads(body)["headers"]["x-fill"]) > 32_000
    assert_kestrel_refusal(_raw(devhost, _get(b"/api/echo/x", _filler_for_section_of(32 * 1024 + 1))), 431)
    assert_kestrel_refusal(_raw(devhost, _get(b"/api/echo/x", _filler_for_section_of(40_000))), 431)  # by the parser


def test_100_header_lines_are_served_and_101_are_a_431(devhost: InProcessHost) -> None:
    def headers(count: int) -> bytes:  # the two base headers count
        return b"".join(b"X-H%d: v\r\n" % i for i in range(count - 2))

    status, _, body = _raw(devhost, _get(b"/api/echo/x", headers(100)))
    assert status == 200
    assert len(json.loads(body)["headers"]) == 98
    assert_kestrel_refusal(_raw(devhost, _get(b"/api/echo/x", headers(101))), 431)
    assert_kestrel_refusal(_raw(devhost, _get(b"/api/echo/x", headers(150))), 431)  # refused by the parser itself


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (_get(b"/api/hello", b"Authorization: " + SECRET.encode() + b"A" * 40_000 + b"\r\n"), 431),
        (_get(b"/api/hello?key=" + SECRET.encode().replace(b" ", b"-") + b"A" * 9000), 414),
        (b"GET /api/hello HTTP/1.1\r\nHost: a\r\nAuthorization " + SECRET.encode() + b"\r\n\r\n", 400),  # no colon
    ],
    ids=["header section too large", "request line too long", "malformed header"],
)
def test_a_refused_request_echoes_nothing_of_what_was_sent(
    devhost: InProcessHost, request_bytes: bytes, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    response = _raw(devhost, request_bytes)
    assert_kestrel_refusal(response, status)
    leaked = SECRET.split()[1][:10]
    assert leaked.encode() not in response[2] and leaked not in json.dumps(response[1])
    assert leaked not in caplog.text
    assert devhost.client.get("/api/hello", params={"name": "x"}).status_code == 200  # the host still serves
