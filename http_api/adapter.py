"""The edge between Azure Functions HTTP triggers and the typed handlers.

Route handlers are wrapped with `http_endpoint`, which identifies the caller, checks the path ids the route declares
(`http_api.path_ids`) and turns an `ApiProblem` (or any unexpected exception) into `application/problem+json`, and
gives handlers `read_json_body` to parse a size-limited JSON body into a pydantic model. Nothing here knows about
agents or runs.
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import azure.functions as func
from pydantic import BaseModel, ValidationError

from agent_runtime import json_limits
from http_api.caller import identified
from http_api.path_ids import check_path_ids
from http_api.problems import (
    PROBLEM_CONTENT_TYPE,
    ApiProblem,
    internal_error,
    json_limit_exceeded,
    malformed_json,
    payload_too_large,
    store_unavailable,
    unsupported_media_type,
    validation_problem,
)
from session_store.errors import StoreUnavailableError

log = logging.getLogger("http_api")
ModelT = TypeVar("ModelT", bound=BaseModel)
Handler = Callable[..., Awaitable[func.HttpResponse]]

# Requests larger than this are refused before parsing (docs/http-api.md); agents' inputs live in the store,
# so this bounds what one call can add to a session, not the session's size.
MAX_BODY_BYTES = 256 * 1024


def json_response(body: BaseModel | dict[str, Any] | list[Any], status: int = 200, **headers: str) -> func.HttpResponse:
    if isinstance(body, BaseModel):
        text = body.model_dump_json(exclude_none=False)
    else:
        text = json.dumps(body, ensure_ascii=False, default=str)
    return func.HttpResponse(text, status_code=status, mimetype="application/json", headers=headers or None)


def problem_response(problem: ApiProblem, instance: str | None = None) -> func.HttpResponse:
    body = problem.to_problem(instance).model_dump_json(exclude_none=True)
    return func.HttpResponse(
        body, status_code=problem.status, headers={"Content-Type": PROBLEM_CONTENT_TYPE, **problem.headers}
    )


def read_json_body(req: func.HttpRequest, model: type[ModelT], *, max_bytes: int = MAX_BODY_BYTES) -> ModelT:
    """Parse the body as `model`: 413 when too large, 415 for non-JSON content, 400 for bad JSON or JSON past the
    limits every durable step behind a route can take (nesting depth, number size: `agent_runtime.json_limits`), 422
    per field. Every route that reads a body reads it here."""
    raw = req.get_body() or b""
    if len(raw) > max_bytes:
        raise payload_too_large(max_bytes, len(raw))
    content_type = (req.headers.get("content-type") or "application/json").split(";")[0].strip().lower()
    if content_type != "application/json" and not content_type.endswith("+json"):
        raise unsupported_media_type(content_type)
    if not raw.strip():
        raise malformed_json("The body is empty; send a JSON object.")
    try:
        data = json_limits.loads(raw)
    except json_limits.JsonLimitError as exc:
        raise json_limit_exceeded(exc.kind, f"{exc}.") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise malformed_json(f"The body is not valid JSON: {exc}.") from exc
    if not isinstance(data, dict):
        raise malformed_json(f"The body must be a JSON object, not {type(data).__name__}.")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_problem(exc, data=data) from exc


def query_model(req: func.HttpRequest, model: type[ModelT]) -> ModelT:
    """Validate query parameters as `model` (422 naming `query.<param>` on failure)."""
    params = dict(req.params)
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise validation_problem(exc, prefix="query", data=params) from exc


@asynccontextmanager
async def admitted(req: func.HttpRequest | None, *, public: bool = False) -> AsyncIterator[None]:
    """What every endpoint wrapper checks before its handler: who is calling (`http_api.caller`: 401 first), then
    the path ids the route declares (`http_api.path_ids`)."""
    async with identified(req, public=public):
        if req is not None:
            check_path_ids(req)
        yield


def http_endpoint(handler: Handler) -> Handler:
    """Wrap a route so that errors become problem+json and unexpected ones are logged with a correlation id."""

    @functools.wraps(handler)
    async def wrapper(*args: Any, **kwargs: Any) -> func.HttpResponse:
        req = next((arg for arg in (*args, *kwargs.values()) if isinstance(arg, func.HttpRequest)), None)
        instance = _path_of(req)
        try:
            async with admitted(req, public=getattr(handler, "public", False)):
                return await handler(*args, **kwargs)
        except ApiProblem as problem:
            return problem_response(problem, instance)
        except StoreUnavailableError as error:
            correlation_id = uuid.uuid4().hex
            log.warning("Store unavailable in %s (correlation id %s): %s", handler.__name__, correlation_id, error)
            return problem_response(store_unavailable(correlation_id), instance)
        except Exception:
            correlation_id = uuid.uuid4().hex
            log.exception("Unhandled error in %s (correlation id %s)", handler.__name__, correlation_id)
            return problem_response(internal_error(correlation_id), instance)

    return wrapper


def _path_of(req: func.HttpRequest | None) -> str | None:
    if req is None:
        return None
    url = req.url or ""
    scheme_end = url.find("://")
    path_start = url.find("/", scheme_end + 3) if scheme_end >= 0 else 0
    path = url[path_start:] if path_start >= 0 else "/"
    return path.split("?", 1)[0]
