"""Facts about the caller and the request that every handler may need."""

from __future__ import annotations

from urllib.parse import urlsplit

import azure.functions as func

from agent_runs.services import RunServices
from agent_runtime.continuation import TokenError
from http_api.problems import ApiProblem


def base_url(req: func.HttpRequest) -> str:
    parts = urlsplit(req.url)
    return f"{parts.scheme}://{parts.netloc}"


def principal(req: func.HttpRequest) -> str | None:
    """Who is calling, per App Service Easy Auth (the platform strips these headers from outside requests)."""
    return req.headers.get("x-ms-client-principal-name") or req.headers.get("x-ms-client-principal-id") or None


def verify_token(services: RunServices, token: str | None, scope: str, subject: str) -> dict[str, object] | None:
    """The cursor of a continuation token, or None without one; a bad token is a 401 naming why."""
    if not token:
        return None
    try:
        return services.tokens.verify(token, scope, subject)
    except TokenError as error:
        raise ApiProblem(
            401,
            error.code,
            "Invalid continuation token",
            error.detail,
            field="query.continuation_token",
            headers={"WWW-Authenticate": 'ContinuationToken error="invalid_token"'},
        ) from error
