"""Request header values that are not ASCII, answered as the Functions host answers them (docs/devhost.md, "Header
values that are not ASCII"): bytes that are not UTF-8 are Kestrel's bare 400 on every path (devhost answered aiohttp's
500 "Server got itself in trouble" on an HTTP v2 function), a UTF-8 value reaches a `func.HttpRequest` decoded, and an
HTTP v2 function never sees it (the host's proxy cannot send it: the invocation times out). Raw sockets: the bytes
go out exactly as written. Each host runs its functions in-process and in a worker process (Azure's own worker
library with DEVHOST_WORKER=runtime on Python 3.13)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from raw_http_exchange import Exchange, assert_kestrel_refusal, exchange

from devhost.testing import InProcessHost

APPS = Path(__file__).resolve().parent.parent / "apps"
NOT_UTF8 = b"\xb2"  # one latin-1 byte (a retry count of "²"), invalid UTF-8
EURO = "€".encode()


def _exchange(host: InProcessHost, head: bytes, body: bytes = b"") -> Exchange:
    """Send one request (the connection closed after it)."""
    framing = b"Host: 127.0.0.1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
    return exchange(host, head + framing + body)


def _assert_kestrel_400(status: int, headers: dict[str, str], body: bytes) -> None:
    assert_kestrel_refusal((status, headers, body), 400)


WORKERS = pytest.mark.parametrize("workers", [None, 1], ids=["in-process", "worker process"], indirect=True)


@pytest.fixture(scope="module")
def workers(request: pytest.FixtureRequest) -> int | None:
    return getattr(request, "param", None)


@pytest.fixture(scope="module")
def basic(workers: int | None) -> Iterator[InProcessHost]:
    with InProcessHost(APPS / "http_basic", clock="real", workers=workers) as running:
        yield running


@pytest.fixture(scope="module")
def streaming(workers: int | None) -> Iterator[InProcessHost]:
    with InProcessHost(APPS / "http_streaming", clock="real", workers=workers) as running:
        yield running


@pytest.mark.parametrize("value", [NOT_UTF8, b"a\xc3(", b"\xed\xa0\x80", b"\xc0\xaf"],
                         ids=["latin-1 byte", "truncated sequence", "encoded surrogate", "overlong slash"])
def test_bytes_that_are_not_utf8_are_kestrels_400_for_an_http_v2_function(streaming: InProcessHost,
                                                                            value: bytes) -> None:
    status, headers, body = _exchange(
        streaming, b"POST /api/echo/a HTTP/1.1\r\nx-stainless-retry-count: " + value + b"\r\n", b"{}")
    _assert_kestrel_400(status, headers, body)
    assert streaming.client.post("/api/echo/a", content=b"x").status_code == 200  # the host still serves


@pytest.mark.parametrize("target", [b"POST /api/echo/x", b"GET /api/hello", b"GET /admin/host/status",
                                    b"GET /runtime/webhooks/durabletask/instances", b"GET /nowhere"])
def test_bytes_that_are_not_utf8_are_kestrels_400_on_every_path(basic: InProcessHost, target: bytes) -> None:
    _assert_kestrel_400(*_exchange(basic, target + b" HTTP/1.1\r\nx-name: " + NOT_UTF8 + b"\r\n"))


@WORKERS
def test_a_utf8_value_reaches_a_func_request_decoded(basic: InProcessHost) -> None:
    status, _, body = _exchange(basic, b"GET /api/echo/x HTTP/1.1\r\nx-name: caf\xc3\xa9 " + EURO + b"\r\n")
    assert status == 200, body
    assert json.loads(body)["headers"]["x-name"] == "café €"


@WORKERS
def test_a_utf8_value_never_reaches_an_http_v2_function(streaming: InProcessHost,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """The host's proxy cannot send it, so the invocation ends at functionTimeout: the host's bare 500."""
    functions = streaming.host.http.functions
    saved, functions.function_timeout = functions.function_timeout, timedelta(seconds=1)
    caplog.set_level(logging.ERROR, logger="devhost.http")
    try:
        status, _, body = _exchange(streaming, b"POST /api/echo/a HTTP/1.1\r\nx-custom: " + EURO + b"\r\n", b"{}")
    finally:
        functions.function_timeout = saved
    assert (status, body) == (500, b"")
    assert "Request headers must contain only ASCII characters." in caplog.text
    assert "Timeout value of 00:00:01 was exceeded by function: Functions.echo" in caplog.text
    ascii_only = streaming.client.post("/api/echo/a", headers={"x-custom": "plain"}, content=b"x")
    assert ascii_only.json()["header"] == "plain"


@WORKERS
@pytest.mark.parametrize("value", [b"caf\xc3\xa9", EURO], ids=["latin-1 text", "euro sign"])
@pytest.mark.parametrize("header", [b"x-forwarded-host", b"x-forwarded-for", b"proxy-authorization", b"te"])
def test_a_utf8_value_in_a_header_the_proxy_does_not_copy_stops_nothing(streaming: InProcessHost,
                                                                        header: bytes, value: bytes) -> None:
    """The proxy drops hop-by-hop and proxy headers and sets X-Forwarded-* itself: such a value never reaches its
    client, and the function runs (devhost waited for functionTimeout; then a `€` crashed its ASGI scope: a 500)."""
    functions = streaming.host.http.functions
    saved, functions.function_timeout = functions.function_timeout, timedelta(seconds=5)
    try:
        status, _, body = _exchange(
            streaming, b"POST /api/echo/a HTTP/1.1\r\nx-custom: plain\r\n" + header + b": " + value + b"\r\n", b"{}")
    finally:
        functions.function_timeout = saved
    assert status == 200, body
    assert json.loads(body)["header"] == "plain"
