"""The answer for a route the app does not have: a 404 in the error shape of the API the path belongs to
(OpenAI's under `/api/v1/`, problem+json elsewhere), never an empty body.

Registered as one catch-all function (`{*path}`, every method; `routes.FALLBACK`). The Functions host orders routes
by ASP.NET Core's route precedence (literal segments before parameters, a catch-all last: devhost ports the same
order, `devhost/http/routes.py`), so it only gets the requests no other function's route matches; the host's own
endpoints (`/admin/...`, `/runtime/webhooks/...`) are outside the `/api` prefix it lives under.
"""

from __future__ import annotations

from urllib.parse import urlparse

import azure.functions as func

from http_api.adapter import problem_response
from http_api.caller import public
from http_api.openai_responses.errors import error_response, openai_error, with_request_id
from http_api.problems import ApiProblem
from http_api.routing import API_PREFIX

OPENAI_PREFIX = f"{API_PREFIX}/v1"
MAX_SHOWN_PATH = 200


@public
async def unknown_route(req: func.HttpRequest) -> func.HttpResponse:
    path = urlparse(req.url).path
    shown = path if len(path) <= MAX_SHOWN_PATH else f"{path[:MAX_SHOWN_PATH]}..."
    method = (req.method or "GET").upper()
    if path == OPENAI_PREFIX or path.startswith(f"{OPENAI_PREFIX}/"):
        # OpenAI's own answer to an unknown URL: 404 `invalid_request_error`, "Invalid URL (<method> /v1/...)".
        message = f"Invalid URL ({method} {shown.removeprefix(API_PREFIX)})"
        return with_request_id(error_response(openai_error(404, message, code="route_not_found")))
    return problem_response(ApiProblem(404, "route_not_found", "Route not found", f"No route {method} {shown}."))
