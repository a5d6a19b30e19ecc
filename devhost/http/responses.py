"""Responses shaped like ASP.NET Web API's `request.CreateResponse` / `CreateErrorResponse` in the Durable extension."""

from __future__ import annotations

import codecs
import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web

JSON_CONTENT_TYPE = "application/json"


async def request_text(request: web.Request) -> str:
    """`HttpContent.ReadAsStringAsync`, as the extension reads a body: the Content-Type charset (default UTF-8), a
    UTF-8 byte order mark skipped, invalid bytes read as U+FFFD. (aiohttp's `text()` decodes strictly: a stray byte
    was a UnicodeDecodeError, i.e. a 500, and a BOM a JSON error.) An unknown charset still fails (a LookupError,
    500), as ReadAsStringAsync's InvalidOperationException does."""
    body = await request.read()
    encoding = codecs.lookup(request.charset or "utf-8").name
    if encoding == "utf-8" and body.startswith(codecs.BOM_UTF8):
        body = body[len(codecs.BOM_UTF8):]
    return body.decode(encoding, errors="replace")


def compact_json(value: Any) -> str:
    """Newtonsoft's default serialisation: no spaces, non-ASCII kept as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def json_response(status: int, value: Any, headers: Mapping[str, str] | None = None) -> web.Response:
    """`CreateResponse(status, value)`: the JSON formatter, `application/json; charset=utf-8`."""
    return web.Response(
        status=status,
        text=compact_json(value),
        content_type=JSON_CONTENT_TYPE,
        charset="utf-8",
        headers=dict(headers or {}),
    )


def empty_response(status: int, headers: Mapping[str, str] | None = None) -> web.Response:
    """`CreateResponse(status)`: no content at all (the SDK then parses the body as None)."""
    return web.Response(status=status, headers=dict(headers or {}))


def error_response(status: int, message: str, exc: BaseException | None = None) -> web.Response:
    """`CreateErrorResponse`: an `HttpError` with `Message`, plus the exception fields when one is given."""
    body: dict[str, Any] = {"Message": message}
    if exc is not None:
        body["ExceptionMessage"] = str(exc)
        body["ExceptionType"] = _dotnet_type_name(exc)
        body["StackTrace"] = None
    return json_response(status, body)


def _dotnet_type_name(exc: BaseException) -> str:
    # The SDK only reads ExceptionMessage; the type name tells a reader which engine error it was.
    return f"devhost.{type(exc).__name__}"
