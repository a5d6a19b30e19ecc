"""RFC 9457 problem details: every caller error leaves the API as `application/problem+json`.

Each problem has a stable machine-readable `code` (clients switch on it, never on `title`/`detail` text) and, where a
single input is at fault, the `field` that caused it (a JSON-pointer-like dotted path such as `body.input`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

PROBLEM_CONTENT_TYPE = "application/problem+json"
PROBLEM_TYPE_BASE = "https://durable-agents.dev/problems/"
_NO_DATA: Any = object()


class InvalidParam(BaseModel):
    """One input at fault (RFC 9457 §3.2 extension member, as used by many APIs)."""

    field: str
    reason: str


class Problem(BaseModel):
    """The problem+json body. Extra members (e.g. `active_run_id`) are allowed, as RFC 9457 permits."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    code: str
    detail: str | None = None
    field: str | None = None
    instance: str | None = None
    invalid_params: list[InvalidParam] = Field(default_factory=list)


class ApiProblem(Exception):
    """Raised anywhere in a handler to answer with a problem; carries no stack trace to the client."""

    def __init__(
        self,
        status: int,
        code: str,
        title: str,
        detail: str | None = None,
        *,
        field: str | None = None,
        invalid_params: list[InvalidParam] | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(f"{status} {code}: {detail or title}")
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.field = field
        self.invalid_params = invalid_params or []
        self.headers = headers or {}
        self.extra = extra

    def to_problem(self, instance: str | None = None) -> Problem:
        return Problem(
            type=PROBLEM_TYPE_BASE + self.code,
            title=self.title,
            status=self.status,
            code=self.code,
            detail=self.detail,
            field=self.field,
            instance=instance,
            invalid_params=self.invalid_params,
            **self.extra,
        )


def _location_to_field(location: tuple[int | str, ...], prefix: str, data: Any = _NO_DATA) -> str:
    """The dotted path of the input at fault. Walking `data` along the location drops the names pydantic gives the
    members of a union it tried (`input.constrained-str`): they are not fields, and clients match on `field`."""
    parts = [prefix] if prefix else []
    if data is _NO_DATA:
        return ".".join([*parts, *(str(part) for part in location)])
    current = data
    for index, part in enumerate(location):
        last = index == len(location) - 1
        if isinstance(current, dict) and (part in current or last):
            current = current.get(part)
        elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            current = current[part]
        else:
            continue  # a union member's tag, not a field of the input
        parts.append(str(part))
    return ".".join(parts)


def validation_problem(error: ValidationError, *, prefix: str = "body", data: Any = _NO_DATA) -> ApiProblem:
    """Turn a pydantic ValidationError into a 422 problem naming every field at fault (the most specific as `field`).
    Pass the validated `data` so the fields are paths into it (see `_location_to_field`)."""
    params = [
        InvalidParam(field=_location_to_field(tuple(item["loc"]), prefix, data), reason=item["msg"])
        for item in error.errors(include_url=False, include_input=False)
    ]
    # A union reports an error per member; the member that matched the input's shape got furthest into it.
    first = max(params, key=lambda param: param.field.count("."), default=InvalidParam(field=prefix, reason="invalid"))
    return ApiProblem(
        422,
        "validation_failed",
        "The request is not valid",
        f"{first.field}: {first.reason}",
        field=first.field,
        invalid_params=params,
    )


# Constructors for the problems every route can give, so codes and titles stay the same everywhere.


def not_found(code: str, what: str, identifier: str, *, field: str | None = None) -> ApiProblem:
    return ApiProblem(404, code, f"{what} not found", f"No {what.lower()} with id '{identifier}'.", field=field)


def malformed_json(detail: str) -> ApiProblem:
    return ApiProblem(400, "malformed_json", "The request body is not valid JSON", detail, field="body")


def json_limit_exceeded(kind: str, detail: str) -> ApiProblem:
    """A body past the JSON limits (`agent_runtime.json_limits`): nesting depth or a number's size (else, a lone
    surrogate or a constant that is not JSON, malformed)."""
    if kind == "depth":
        return ApiProblem(400, "json_too_deep", "The request body nests too deep", detail, field="body")
    if kind == "number":
        return ApiProblem(
            400, "json_number_out_of_range", "A number in the request body is out of range", detail, field="body"
        )
    return malformed_json(detail)


def payload_too_large(limit_bytes: int, actual_bytes: int) -> ApiProblem:
    return ApiProblem(
        413,
        "payload_too_large",
        "The request body is too large",
        f"The body has {actual_bytes} bytes; the limit is {limit_bytes} bytes.",
        field="body",
        limit_bytes=limit_bytes,
    )


def unsupported_media_type(content_type: str) -> ApiProblem:
    return ApiProblem(
        415,
        "unsupported_media_type",
        "The request body must be JSON",
        f"Content-Type '{content_type}' is not supported; send application/json.",
        field="header.content-type",  # as every header at fault: header.<name>
    )


def store_unavailable(correlation_id: str) -> ApiProblem:
    # A throttled or unreachable store is the server's temporary problem, not a bug: 503 + Retry-After, no internals.
    return ApiProblem(
        503,
        "store_unavailable",
        "The session store is temporarily unavailable",
        f"Retry the request shortly; reference {correlation_id} in the logs.",
        headers={"Retry-After": "1"},
        correlation_id=correlation_id,
    )


def internal_error(correlation_id: str) -> ApiProblem:
    # Never echo the exception: it may carry secrets or internals. The id ties the response to the server log.
    return ApiProblem(
        500,
        "internal_error",
        "Internal error",
        f"The server failed to handle the request; reference {correlation_id} in the logs.",
        correlation_id=correlation_id,
    )
