"""aiohttp request -> `func.HttpRequest` and user result -> aiohttp response, via the real `azure.functions` converters.

The worker decodes the host's RpcHttp message with `HttpRequestConverter.decode` and encodes results with
`HttpResponseConverter.encode`; going through the same converters keeps header casing, content-type defaults and the
str / HttpResponse rules identical to a deployed app.
"""

from __future__ import annotations

from typing import Any

import azure.functions as func
from aiohttp import web
from azure.functions import meta
from azure.functions.http import HttpRequestConverter, HttpResponseConverter
from multidict import CIMultiDict


class ResultEncodingError(TypeError):
    """The function returned something the http output binding cannot encode (the worker fails the invocation)."""


def _string_datum(value: str) -> meta.Datum:
    return meta.Datum(value=value, type="string")


def build_http_request(request: web.Request, body: bytes, route_params: dict[str, str]) -> func.HttpRequest:
    """The request the Python worker would build (repeated headers are comma-joined, the first query value wins)."""
    headers: dict[str, str] = {}
    for name, value in request.headers.items():
        key = name.lower()
        headers[key] = f"{headers[key]},{value}" if key in headers else value
    query: dict[str, str] = {}
    for name, value in request.query.items():
        query.setdefault(name, value)
    datum = meta.Datum(
        type="http",
        value={
            "method": _string_datum(request.method),
            "url": _string_datum(str(request.url)),
            "headers": {k: _string_datum(v) for k, v in headers.items()},
            "query": {k: _string_datum(v) for k, v in query.items()},
            "params": {k: _string_datum(v) for k, v in route_params.items()},
            # The worker announces RawHttpBodyBytes, so the host always sends the body as bytes.
            "body": meta.Datum(value=body, type="bytes"),
        },
    )
    return HttpRequestConverter.decode(datum, trigger_metadata=None)


def build_web_response(result: Any) -> web.Response:
    """Encode a returned `func.HttpResponse` or `str` like the worker, then build the host's HTTP response."""
    try:
        datum = HttpResponseConverter.encode(result, expected_type=None)
    except NotImplementedError as exc:
        raise ResultEncodingError(
            f"unable to encode outgoing TypedData: unsupported type for Python type {type(result).__name__!r}"
        ) from exc
    if datum.type == "string":
        return web.Response(status=200, body=str(datum.value).encode("utf-8"), content_type="text/plain",
                            charset="utf-8")
    value = datum.value
    headers: CIMultiDict[str] = CIMultiDict()
    for name, header in value["headers"].items():
        headers.add(name, header.value)
    for cookie in value.get("cookies") or []:
        for morsel in cookie.values():
            headers.add("Set-Cookie", morsel.OutputString())
    return web.Response(status=int(value["status_code"].value), body=value["body"].value or b"", headers=headers)
