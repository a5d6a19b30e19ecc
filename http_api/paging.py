"""Continuation tokens of the caller's lists: the store's cursor, signed and bound to the list and the caller."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from agent_runs.services import RunServices
from http_api.identity import Principal
from http_api.problems import ApiProblem
from http_api.request_context import verify_token
from session_store import InvalidContinuationError


def store_cursor(services: RunServices, token: str | None, scope: str, caller: Principal) -> str | None:
    """The store cursor inside the caller's token (401 for a token of another list or another principal)."""
    cursor = verify_token(services, token, scope, caller.id)
    page = cursor.get("page") if cursor else None
    return page if isinstance(page, str) else None


def next_token(services: RunServices, store_continuation: str | None, scope: str, caller: Principal) -> str | None:
    if not store_continuation:
        return None
    return services.tokens.issue(scope, caller.id, {"page": store_continuation})


@asynccontextmanager
async def store_paging() -> AsyncIterator[None]:
    """A cursor the store refuses (issued for other filters of the same list) is the caller's 400."""
    try:
        yield
    except InvalidContinuationError as error:
        raise ApiProblem(
            400,
            "invalid_continuation_token",
            "Invalid continuation token",
            "The token belongs to the same list with other filters; start again without it.",
            field="query.continuation_token",
        ) from error
