"""Responses shaped like ASP.NET Web API's `request.CreateResponse` / `CreateErrorResponse` in the Durable extension."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web

JSON_CONTENT_TYPE = "application/json"


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
