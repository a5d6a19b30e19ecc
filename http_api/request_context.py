"""Facts about the caller and the request that every handler may need."""

from __future__ import annotations

from urllib.parse import urlsplit

import azure.functions as func

from agent_runs.services import RunServices
from agent_runtime.continuation import TokenError
from http_api.caller import current_principal
from http_api.problems import ApiProblem
from http_api.token_binding import bound_principal


def base_url(req: func.HttpRequest) -> str:
    """The root of the links the app hands out: the configured public URL or, on Azure, the platform's host name
    (`DeploymentSettings.link_base`); the request's URL only locally, where no one else can reach the app."""
    configured = RunServices.current().deployment_settings.link_base
    if configured:
        return configured
    parts = urlsplit(req.url)
    return f"{parts.scheme}://{parts.netloc}"


def run_path(run_id: str, kind: str) -> str:
    """The path a run is polled at (`kind`: the run record's): a workflow run's is on the workflow routes."""
    return f"/api/workflows/runs/{run_id}" if kind == "workflow" else f"/api/runs/{run_id}"


def principal(req: func.HttpRequest) -> str | None:
    """The validated caller's id (`http_api.caller`; never a header the client could forge)."""
    return current_principal().id


def verify_token(services: RunServices, token: str | None, scope: str, subject: str) -> dict[str, object] | None:
    """The cursor of a continuation token, or None without one; a bad token is a 401 naming why."""
    if not token:
        return None
    try:
        cursor = services.tokens.verify(token, scope, subject)
        bound = bound_principal(cursor)
        if bound is not None and bound != current_principal().id:
            raise TokenError("token_foreign", "The continuation token was issued to another caller.")
        return cursor
    except TokenError as error:
        raise ApiProblem(
            401,
            error.code,
            "Invalid continuation token",
            error.detail,
            field="query.continuation_token",
            headers={"WWW-Authenticate": 'ContinuationToken error="invalid_token"'},
        ) from error
