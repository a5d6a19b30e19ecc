"""OpenAI's error shape (`{"error": {"message", "type", "param", "code"}}`) for the Responses routes.

Handlers raise the same `ApiProblem`s as the rest of the API (shared helpers raise them too); this edge renders them
the way OpenAI clients parse errors, naming the request parameter at fault.
"""

from __future__ import annotations

import functools
import logging
import uuid
from typing import Any, Protocol, TypeVar

import azure.functions as func

from http_api.adapter import Handler, admitted, json_response
from http_api.problems import ApiProblem
from session_store.errors import StoreUnavailableError

log = logging.getLogger("http_api.openai_responses")


class _HasHeaders(Protocol):
    @property
    def headers(self) -> Any: ...


ResponseT = TypeVar("ResponseT", bound=_HasHeaders)

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    410: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    503: "server_error",
}
# The 409s that end by themselves (a start being stored, a run going on, a first request with the key still running):
# the openai SDKs' own retry of them is welcome; every other 409 tells the SDKs not to retry (`x-should-retry`).
PASSING_CONFLICTS = frozenset({"session_busy", "previous_response_in_progress", "idempotency_key_busy"})
# Fields the shared helpers name, as the Responses parameter a client sent.
_PARAMS = {
    "body.session_id": "previous_response_id",
    "path.run_id": "response_id",
    "path.approval_id": "approval_request_id",
    "body.arguments": "input",
    "body": None,
}


def openai_error(status: int, message: str, *, param: str | None = None, code: str | None = None) -> ApiProblem:
    """A problem that renders as OpenAI's error (400 `invalid_request_error` by default)."""
    return ApiProblem(status, code or "invalid_request", message, message, field=param)


def unsupported(param: str, detail: str | None = None) -> ApiProblem:
    message = f"Unsupported parameter: '{param}'" + (f": {detail}" if detail else " is not supported by this server.")
    return openai_error(400, message, param=param, code="unsupported_parameter")


def error_body(problem: ApiProblem) -> dict[str, Any]:
    param = problem.field
    if param is not None:
        param = _PARAMS.get(param, param.removeprefix("body.").removeprefix("query.").removeprefix("path."))
    status = 400 if problem.status == 422 else problem.status
    message = problem.detail or problem.title
    if problem.field and param and message.startswith(f"{problem.field}:"):
        message = f"Invalid '{param}':" + message[len(problem.field) + 1 :]
    return {
        "error": {
            "message": message,
            "type": _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error"),
            "param": param,
            "code": problem.code,
        }
    }


def error_response(problem: ApiProblem) -> func.HttpResponse:
    # OpenAI answers invalid parameters with 400 (the rest of this API uses 422 for a field that fails validation).
    status = 400 if problem.status == 422 else problem.status
    headers = dict(problem.headers)
    if status == 409 and problem.code not in PASSING_CONFLICTS:
        headers["x-should-retry"] = "false"  # the SDKs retry every 409 unless told: this one stays
    return json_response(error_body(problem), status=status, **headers)


def with_request_id(response: ResponseT, request_id: str | None = None) -> ResponseT:
    """OpenAI's `x-request-id` on an answer: the SDKs read it into `response._request_id` (Python), `request_id`
    (npm `withResponse()`) and every error's `request_id`; it is the reference a failure's log line names."""
    response.headers["x-request-id"] = request_id or new_request_id()
    return response


def new_request_id() -> str:
    return f"req_{uuid.uuid4().hex}"


def openai_endpoint(handler: Handler) -> Handler:
    """Like `http_endpoint`, but every error leaves in OpenAI's shape (errors found before a stream starts, too: a
    stream the handler returns is passed on as it is), and every answer has a request id."""

    @functools.wraps(handler)
    async def wrapper(*args: Any, **kwargs: Any) -> func.HttpResponse:
        req = next((arg for arg in (*args, *kwargs.values()) if isinstance(arg, func.HttpRequest)), None)
        request_id = new_request_id()
        try:
            async with admitted(req):  # who is calling, then the route's path ids, as for every route
                response = await handler(*args, **kwargs)
        except ApiProblem as problem:
            response = error_response(problem)
        except StoreUnavailableError as error:
            log.warning("Store unavailable in %s (request id %s): %s", handler.__name__, request_id, error)
            message = f"The session store is temporarily unavailable; retry shortly (reference {request_id})."
            response = error_response(ApiProblem(503, "store_unavailable", message, message,
                                                 headers={"Retry-After": "1"}))
        except Exception:
            log.exception("Unhandled error in %s (request id %s)", handler.__name__, request_id)
            message = f"The server failed to handle the request (reference {request_id} in the logs)."
            response = error_response(ApiProblem(500, "server_error", message, message))
        return with_request_id(response, request_id)

    return wrapper
