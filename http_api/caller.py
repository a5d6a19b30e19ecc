"""The caller of the request being handled: authenticated once by `http_endpoint`, read by the lookups.

`http_endpoint` runs every handler inside `identified(req, public=...)`; `current_principal()` then returns the
validated `Principal`. Resource lookups (`run_or_404`, `session_or_404`, ...) read it themselves, so every route that
finds a run or a session through them enforces ownership, including routes added later.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar

import azure.functions as func

from http_api.identity import Principal, authenticator

_current: ContextVar[Principal | None] = ContextVar("current_principal", default=None)


@asynccontextmanager
async def identified(req: func.HttpRequest | None, *, public: bool = False) -> AsyncIterator[None]:
    """Authenticate the request (401 when the mode requires a principal and there is none), except on public
    routes (health, the OpenAPI document), which run without one."""
    principal = None
    if req is not None and not public:
        principal = await authenticator().authenticate({k.lower(): v for k, v in req.headers.items()})
    token = _current.set(principal)
    try:
        yield
    finally:
        _current.reset(token)


@contextmanager
def acting_as(principal: Principal) -> Iterator[None]:
    """Run a public route's work as `principal`: an identity another channel validated (a Slack user, by Slack's
    request signature and the app's map of Slack users), so ownership and approver checks apply as to any caller."""
    token = _current.set(principal)
    try:
        yield
    finally:
        _current.reset(token)


def current_principal() -> Principal:
    """The validated caller. Outside an authenticated handler this fails closed (a bug, never an anonymous pass)."""
    principal = _current.get()
    if principal is None:
        raise RuntimeError("no authenticated principal: the handler is not wrapped by http_endpoint (or is public)")
    return principal


def public(handler):  # type: ignore[no-untyped-def]
    """Mark a handler as needing no principal (applied under `@http_endpoint`)."""
    handler.public = True
    return handler
