"""The size limits Kestrel puts on a request's head, as the Functions host runs it (facts: docs/devhost.md).

The host's `Program.cs` changes only `MaxRequestBodySize` (100 MB), so Kestrel's defaults hold
(`KestrelServerLimits`): a request line of at most 8 KB with its CRLF (else 414), at most 100 header lines (else
431) and a header section of at most 32 KB (its lines with their CRLFs; else 431). No single header has a limit of
its own: a 10 KB `Authorization` or `Cookie` header reaches the function, where aiohttp's default parser refused
anything over 8,190 bytes. Each refusal is Kestrel's bare answer (`KestrelBadHttpRequestException`): the status,
`Content-Length: 0`, the connection closed, nothing of what was sent, before any routing.

aiohttp's parser is given limits just above these (`PARSER_LIMITS`), so what it refuses itself is over Kestrel's limit
too, and `refusal_status` applies the exact ones to a request it parsed. aiohttp keeps no header bytes, so a line is
counted as `Name: value` and its CRLF (what clients send; one without the space is counted a byte long).
"""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong

MAX_REQUEST_LINE_BYTES = 8 * 1024
MAX_HEADER_COUNT = 100
MAX_HEADERS_TOTAL_BYTES = 32 * 1024
"""Of the header lines with their CRLFs (Kestrel allows 2 bytes more, for the empty line that ends them)."""

URI_TOO_LONG = 414
HEADER_FIELDS_TOO_LARGE = 431
BAD_REQUEST = 400

# aiohttp's own limits (`RequestHandler` keyword arguments): its target limit is the whole request line's (a target
# that long cannot fit), one header's name and value cannot be longer than the whole section, and one header more
# than Kestrel allows is left for `refusal_status` to count (so the parser holds ~3 MB of headers at most).
PARSER_LIMITS = {
    "max_line_size": MAX_REQUEST_LINE_BYTES,
    "max_field_size": MAX_HEADERS_TOTAL_BYTES,
    "max_headers": MAX_HEADER_COUNT + 1,
}
_TOO_MANY_HEADERS = "Too many headers received"  # aiohttp's message past `max_headers`


def refusal_status(method: str, raw_target: str, raw_headers: Sequence[tuple[bytes, bytes]]) -> int | None:
    """Kestrel's status for a request aiohttp parsed but Kestrel would refuse for its size, or None."""
    target_bytes = len(raw_target.encode("utf-8", "surrogateescape"))
    if len(method) + 1 + target_bytes + len(" HTTP/1.1\r\n") > MAX_REQUEST_LINE_BYTES:
        return URI_TOO_LONG
    if len(raw_headers) > MAX_HEADER_COUNT:
        return HEADER_FIELDS_TOO_LARGE
    section = sum(len(name) + len(b": ") + len(value) + len(b"\r\n") for name, value in raw_headers)
    if section > MAX_HEADERS_TOTAL_BYTES:
        return HEADER_FIELDS_TOO_LARGE
    return None


def parser_refusal_status(error: HttpProcessingError) -> int:
    """Kestrel's status for a request aiohttp's parser refused: a target or a header over the limits above is 414
    or 431 (aiohttp raises `LineTooLong` with the limit it hit), anything malformed 400."""
    if isinstance(error, LineTooLong):
        return URI_TOO_LONG if error.args[1] == MAX_REQUEST_LINE_BYTES else HEADER_FIELDS_TOO_LARGE
    if error.message == _TOO_MANY_HEADERS:
        return HEADER_FIELDS_TOO_LARGE
    return BAD_REQUEST


def kestrel_refusal(status: int = BAD_REQUEST) -> web.Response:
    """Kestrel's answer to a request it refuses before routing: the status, `Content-Length: 0`, the connection
    closed."""
    response = web.Response(status=status, headers={"Connection": "close"})  # said also to a request aiohttp
    response.force_close()  # could not read (it answers those as HTTP/1.0, where closing goes without saying)
    return response


__all__ = ["PARSER_LIMITS", "kestrel_refusal", "parser_refusal_status", "refusal_status"]
