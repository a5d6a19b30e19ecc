"""A route of the HTTP API, declared once: the function the host serves, its path parameters and its OpenAPI operation.

`http_api.routes` lists them; `http_api.route_functions` turns each into the function the Functions host indexes and
`http_api.openapi` into its operation of `/api/openapi.json`, so the served routes and the document cannot drift. A
declaration that contradicts itself (path parameters that are not the template's, event kinds of a route that does
not stream, a public route whose handler authenticates) fails at import, naming the route.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from http_api.path_ids import PathParam

API_PREFIX = "/api"  # host.json `extensions.http.routePrefix` (the Functions default)
_TEMPLATE_PARAM = re.compile(r"{([^{}]*)}")


class RouteTableError(ValueError):
    """Two routes of the table collide (function name, method and path, or operation id)."""


class Route(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    # The function
    name: str  # the function's name: the Functions host, devhost and the logs know the route by it
    method: Literal["get", "post", "delete", "put", "patch"]
    path: str  # the route template under the prefix, e.g. "runs/{run_id}"
    handler: Callable[..., Awaitable[Any]]
    params: tuple[PathParam, ...] = ()  # one per `{name}` of `path`, in order: checked before the handler runs
    client: bool = False  # the handler takes the Durable client after the request
    native: bool = False  # the handler takes the extension's `Request` and returns its response (a stream can)
    public: bool = False  # anonymous: no function key, no caller (its handler is marked `@public` as well)
    # Its OpenAPI operation
    summary: str
    tag: str
    operation_id: str | None = None  # the function's name unless set
    query: type[BaseModel] | None = None
    body: type[BaseModel] | None = None
    responses: dict[int, type[BaseModel] | None] = Field(default_factory=dict)
    problems: tuple[int, ...] = ()
    text: str | None = None  # a non-JSON success body: its media type (range), e.g. the page's files
    idempotent: bool = False  # accepts an Idempotency-Key header
    stream: bool = False  # 200 may be a text/event-stream (see docs/streams.md): served as it is produced
    openai_events: bool = False  # ... of OpenAI's Responses events (`event:` + `data:`, no `id:`), or JSON

    @property
    def api_path(self) -> str:
        return f"{API_PREFIX}/{self.path}"

    @property
    def operation(self) -> str:
        return self.operation_id or self.name

    @model_validator(mode="after")
    def _consistent(self) -> Route:
        where = f"route {self.name!r} ({self.method.upper()} {self.path})"
        if not self.name.isidentifier():
            raise ValueError(f"{where}: the function name must be a Python identifier")
        if self.path.startswith("/") or self.path.endswith("/"):
            raise ValueError(f"{where}: the template is relative to {API_PREFIX}/, without a slash at either end")
        template = _TEMPLATE_PARAM.findall(self.path)
        declared = [param.name for param in self.params]
        if template != declared:
            raise ValueError(f"{where}: the template's parameters {template} are not the declared ones {declared}")
        if self.openai_events and not self.stream:
            raise ValueError(f"{where}: openai_events describes a stream, but the route does not stream")
        if self.public != bool(getattr(self.handler, "public", False)):
            marked = "is not" if self.public else "is"
            raise ValueError(f"{where}: public={self.public} but its handler {marked} marked @public")
        return self


def check_table(routes: Iterable[Route]) -> tuple[Route, ...]:
    """The routes, once no two share a function name, a method and path (whatever its parameters are called) or an
    operation id."""
    table = tuple(routes)
    keys: dict[str, Callable[[Route], str]] = {
        "function name": lambda r: r.name,
        "method and path": lambda r: f"{r.method.upper()} {_TEMPLATE_PARAM.sub('{}', r.path).lower()}",
        "operation id": lambda r: r.operation,
    }
    for what, key in keys.items():
        seen: dict[str, Route] = {}
        for route in table:
            other = seen.setdefault(key(route), route)
            if other is not route:
                raise RouteTableError(f"routes {other.name!r} and {route.name!r} have the same {what}: {key(route)}")
    return table
