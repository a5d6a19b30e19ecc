"""The HTTP functions the Functions host indexes, made from the route table: one real `async def` per route.

With `azurefunctions-extensions-http-fastapi` loaded (the streams need it) the Python worker runs in HTTP v2 mode and
indexes a function by its `__name__`, matches its parameter names to its bindings and reads its annotations with
`typing.get_type_hints` (not `__signature__`): the trigger parameter must be the extension's `Request`, the return
one of its responses. So each route gets a fresh function of its own shape (with or without the Durable client
parameter, named as its binding), with real annotations resolved in this module, and nothing patched afterwards.

No `from __future__ import annotations` here on purpose: the annotations are the classes themselves.
"""

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import azure.durable_functions as df
import azure.functions as func
from azurefunctions.extensions.http.fastapi import Request, Response, StreamingResponse

from http_api.fastapi_bridge import serve
from http_api.path_ids import serving
from http_api.routing import Route

REQUEST = "req"  # the HTTP trigger's parameter
CLIENT = "client"  # the Durable client's parameter (`durable_client_input(client_name=...)`)
RouteFunction = Callable[..., Awaitable[Response]]


def register(app: df.DFApp, routes: Iterable[Route]) -> None:
    """Register every route's function on the app, as `@app.route` (and `@app.durable_client_input`) would."""
    for route in routes:
        function: Any = route_function(route)
        if route.client:
            function = app.durable_client_input(client_name=CLIENT)(function)
        app.route(
            route=route.path,
            methods=[route.method.upper()],
            auth_level=func.AuthLevel.ANONYMOUS if route.public else func.AuthLevel.FUNCTION,
            trigger_arg_name=REQUEST,
        )(function)


def route_function(route: Route) -> RouteFunction:
    """The route's function: named as the route, its handler called with the request (and the client)."""
    function = _with_client(route) if route.client else _plain(route)
    # A stream is annotated as one: hosts serve it on the client's connection as it is produced.
    function.__annotations__["return"] = StreamingResponse if route.stream else Response
    function.__name__ = function.__qualname__ = route.name
    function.__doc__ = f"{route.method.upper()} {route.api_path}: {route.summary}"
    return function


def _plain(route: Route) -> RouteFunction:
    async def function(req: Request) -> Response:
        return await _serve(route, req)

    return function


def _with_client(route: Route) -> RouteFunction:
    async def function(req: Request, client: df.DurableOrchestrationClient) -> Response:
        return await _serve(route, req, client)

    return function


async def _serve(route: Route, req: Request, *client: df.DurableOrchestrationClient) -> Response:
    with serving(route.params):  # what the endpoint wrappers check before the handler (http_api.path_ids)
        if route.native:
            answer: Response = await route.handler(req, *client)
            return answer
        return await serve(route.handler, req, *client)  # a `func.HttpResponse` converted, a stream as it is
