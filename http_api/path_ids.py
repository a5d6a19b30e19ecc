"""Path parameters are ids, checked before any handler runs: an id that cannot exist (empty, too long, a character
outside `A-Za-z0-9._:-`, or a session id the app keeps for its own records) is a 404 problem naming `path.<param>`
with the route's own not-found code, never a store error (500).

Each route of the route table (`http_api.routes`) declares its parameters as `PathParam`s. The function generated for
the route serves the request inside `serving(params)`; the endpoint wrappers (`http_endpoint`, `openai_endpoint`) run
`check_path_ids` once the caller is identified, so a caller without credentials still gets its 401 first and the
problem leaves in the route's own error shape.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import azure.functions as func
from pydantic import BaseModel, ConfigDict

from http_api.models import ID_PATTERN
from http_api.problems import ApiProblem
from http_api.reserved_ids import reserved_prefix

_SHOWN_CHARS = 64
_ID_RULE = "1-128 characters of A-Z a-z 0-9 . _ : - (starting with a letter or digit)"


class PathParam(BaseModel):
    """A path parameter: the values it accepts and the 404 any other value gets (the handler's own for an unknown
    id, e.g. `run_not_found`, so a malformed id and a missing one look the same)."""

    model_config = ConfigDict(frozen=True)

    name: str
    not_found: str  # the problem code
    noun: str  # "Run": the title is "Run not found"
    pattern: str = ID_PATTERN
    session: bool = False  # a session id: none of the app's own (http_api/reserved_ids.py) either


_served: ContextVar[tuple[PathParam, ...] | None] = ContextVar("served_path_params", default=None)


@contextmanager
def serving(params: tuple[PathParam, ...]) -> Iterator[None]:
    """The path parameters of the route whose request is being handled (set by the route's function)."""
    token = _served.set(params)
    try:
        yield
    finally:
        _served.reset(token)


def check_path_ids(req: func.HttpRequest) -> None:
    values = req.route_params or {}
    params = _served.get()
    if params is None:  # a handler called outside the route table: every route value must still be an id
        params = tuple(PathParam(name=name, not_found="not_found", noun="Resource") for name in values)
    for param in params:
        value = values.get(param.name) or ""
        reserved = reserved_prefix(value) if param.session else None
        if re.fullmatch(param.pattern, value) and reserved is None:
            continue
        shown = value if len(value) <= _SHOWN_CHARS else f"{value[:_SHOWN_CHARS]}..."
        rule = _ID_RULE if param.pattern == ID_PATTERN else f"it must match {param.pattern}"
        if reserved is not None:
            rule = f"ids starting with {reserved!r} are reserved for the app's own records"
        raise ApiProblem(
            404, param.not_found, f"{param.noun} not found", f"{shown!r} is not a valid id: {rule}.",
            field=f"path.{param.name}",
        )
