"""The app's handlers under `azurefunctions-extensions-http-fastapi` (the Python worker's HTTP v2 mode).

Importing the extension (the SSE routes need it to stream on Azure) switches the whole worker process to HTTP v2:
EVERY HTTP function then receives a `fastapi.Request` and its return value is what a FastAPI route returns; a
function annotated `func.HttpRequest` / `func.HttpResponse` does not even load. The handlers of this app are written
against `func.HttpRequest` / `func.HttpResponse` (`http_api.adapter`), so the function of each route
(`http_api.route_functions`) takes the extension's `Request`, hands its handler the `func.HttpRequest` built here
(method, URL, headers, query, route values, body) and turns its `func.HttpResponse` into a FastAPI `Response`
(status, headers, body unchanged).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import azure.functions as func
from azurefunctions.extensions.http.fastapi import Request, Response


def public_url(request: Request) -> str:
    """The URL the client used. On Azure the host proxies the request to the worker's web server; when it says where
    the request came in (`X-Forwarded-Host`/`-Proto`), that is the URL links must use, not the worker's address."""
    url = request.url
    host = request.headers.get("x-forwarded-host")
    if host:
        proto = request.headers.get("x-forwarded-proto") or url.scheme
        url = url.replace(scheme=proto.split(",")[0].strip(), netloc=host.split(",")[0].strip())
    return str(url)


async def to_func_request(request: Request) -> func.HttpRequest:
    """The `func.HttpRequest` a non-v2 worker would have built for this request."""
    return func.HttpRequest(
        method=request.method,
        url=public_url(request),
        headers=_headers(request),
        params=host_query(request.query_params.multi_items()),
        route_params={k: str(v) for k, v in request.path_params.items()},
        body=await request.body(),
    )


def host_query(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The query as Azure's Functions host passes it to a non-v2 worker (`RpcHttp.query`, built from ASP.NET's
    `HttpRequest.Query`: azure-functions-host GrpcMessageConversionExtensions.cs, ToRpcHttp): each name once, its
    non-empty values comma-joined (`StringValues.ToString()`), a name without one left out. So a parameter sent twice
    reads as "v1,v2", exactly like `?name=v1,v2` (the two cannot be told apart here: a list is read from `req.url`,
    as `include[]` is), never as one of its values; `dict(query_params)` would silently keep the last one. (The host
    also groups names that differ only in case; the app's names are lower-case, so that is left out.)"""
    return {name: value for name, value in _joined(pairs).items() if value}


def host_headers(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The headers as Azure's Functions host passes them to a non-v2 worker (`RpcHttp.headers`, from ASP.NET's
    `HttpRequest.Headers`, same place: `Headers.Add(pair.Key.ToLowerInvariant(), pair.Value.ToString())`): each
    lower-case name once, the non-empty values of a repeated header comma-joined, an empty header kept as "". So a
    header sent twice reads as "v1,v2", like `Name: v1,v2` once, never as one of its values (`dict(headers)` keeps
    the first): a handler that must not guess between two values refuses a comma (`identity`, `idempotency`)."""
    return _joined((name.lower(), value) for name, value in pairs)


def _joined(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Each name once, with its non-empty values joined with "," (.NET's `StringValues.ToString()`). Every request
    goes through here: a name sent once (nearly all) is stored as it is, no list or join built for it."""
    joined: dict[str, str] = {}
    for name, value in pairs:
        seen = joined.get(name)
        if seen is None:
            joined[name] = value
        elif value:
            joined[name] = f"{seen},{value}" if seen else value
    return joined


def _headers(request: Request) -> dict[str, str]:
    return host_headers((name.decode("latin-1"), value.decode("latin-1")) for name, value in request.headers.raw)


def _first_values(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers by name with the first value of a repeated one, as `dict()` of a headers mapping has them."""
    first: dict[str, str] = {}
    for name, value in headers:
        first.setdefault(name, value)
    return first


def to_fastapi_response(response: func.HttpResponse) -> Response:
    headers = _first_values(response.headers.items())  # dict(response.headers), without a lookup per name
    if not any(name.lower() == "content-type" for name in headers):
        # What the worker's HttpResponseConverter sends for a response with only a mimetype.
        headers["Content-Type"] = f"{response.mimetype}; charset={response.charset}"
    return Response(content=response.get_body(), status_code=response.status_code, headers=headers)


async def serve(handler: Callable[..., Awaitable[Any]], request: Request, *args: Any) -> Response:
    """Run `handler`, written against `func.HttpRequest`, for a function that takes the extension's `Request`, and
    return what it answered as the extension's `Response`: a stream as it is, a `func.HttpResponse` converted."""
    result = await handler(await to_func_request(request), *args)
    return to_fastapi_response(result) if isinstance(result, func.HttpResponse) else result
