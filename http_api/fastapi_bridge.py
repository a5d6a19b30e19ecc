"""The app's HTTP functions under `azurefunctions-extensions-http-fastapi` (the Python worker's HTTP v2 mode).

Importing the extension (the SSE routes need it to stream on Azure) switches the whole worker process to HTTP v2:
EVERY HTTP function then receives a `fastapi.Request` and its return value is what a FastAPI route returns; a
function annotated `func.HttpRequest` / `func.HttpResponse` does not even load. The handlers of this app are written
against `func.HttpRequest` / `func.HttpResponse` (`http_api.adapter`), so `DFApp.route` here wraps each one: the
worker sees a function taking the extension's `Request` and returning its `Response`, and the handler still gets a
`func.HttpRequest` (built from the FastAPI request: method, URL, headers, query, route values, body) and its
`func.HttpResponse` is turned into a FastAPI `Response` (status, headers, body unchanged). Functions already written
for the extension (a parameter annotated with its `Request`) are left alone.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import azure.durable_functions as df
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
        headers=dict(request.headers),
        params=dict(request.query_params),
        route_params={k: str(v) for k, v in request.path_params.items()},
        body=await request.body(),
    )


def to_fastapi_response(response: func.HttpResponse) -> Response:
    headers = dict(response.headers)
    if not any(name.lower() == "content-type" for name in headers):
        # What the worker's HttpResponseConverter sends for a response with only a mimetype.
        headers["Content-Type"] = f"{response.mimetype}; charset={response.charset}"
    return Response(content=response.get_body(), status_code=response.status_code, headers=headers)


async def serve(handler: Callable[..., Awaitable[Any]], request: Request, *args: Any) -> Response:
    """For a function that takes the extension's `Request` (a route that may stream): run `handler`, written against
    `func.HttpRequest`, and return what it answered, a stream (the extension's `Response`) or a `func.HttpResponse`
    (converted), as the extension's `Response`."""
    result = await handler(await to_func_request(request), *args)
    return to_fastapi_response(result) if isinstance(result, func.HttpResponse) else result


def takes_extension_request(fn: Callable[..., Any]) -> bool:
    try:
        signature = inspect.signature(fn, eval_str=True)
    except (NameError, TypeError, ValueError):
        return False
    return any(
        inspect.isclass(p.annotation) and issubclass(p.annotation, Request) for p in signature.parameters.values()
    )


def bridge(fn: Callable[..., Any], request_param: str = "req") -> Callable[..., Any]:
    """`fn(req: func.HttpRequest, ...) -> func.HttpResponse` as a function the HTTP v2 worker accepts."""

    @functools.wraps(fn)
    async def handler(*args: Any, **kwargs: Any) -> Any:
        incoming = kwargs.get(request_param)
        if isinstance(incoming, Request):
            kwargs[request_param] = await to_func_request(incoming)
        result = fn(*args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(incoming, Request) and isinstance(result, func.HttpResponse):
            return to_fastapi_response(result)
        return result

    signature = inspect.signature(fn)
    handler.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[
            p.replace(annotation=Request) if name == request_param else p
            for name, p in signature.parameters.items()
        ],
        return_annotation=Response,
    )
    return handler


class DFApp(df.DFApp):
    """`df.DFApp` whose routes are bridged to the extension's types (see the module docstring)."""

    def route(self, *args: Any, **kwargs: Any) -> Callable[..., Any]:
        register = super().route(*args, **kwargs)
        request_param = kwargs.get("trigger_arg_name", "req")

        def decorator(fn: Any) -> Any:
            builder = register(fn)
            function = builder._function  # the SDK's own decorators (durable clients) rewrap it the same way
            if not takes_extension_request(function._func):
                function._func = bridge(function._func, request_param)
            return builder

        return decorator
