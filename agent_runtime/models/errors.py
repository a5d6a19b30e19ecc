"""Model-call failures, classified once so every layer above decides the same way.

`ModelError.retryable` is True for 408/409/429/5xx, timeouts, dropped connections and malformed responses (a retry
may well succeed); False for 400/401/403/404/422 and other caller errors (a retry would fail the same way: fail fast
with a message that says what to fix). `retry_after` is the server's `Retry-After` (seconds), when it sent one.
Messages never carry credentials: anything that looks like a key, and every secret the client knows, is masked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from pydantic import BaseModel

from agent_runtime import redaction
from agent_runtime.messages import Usage

RETRYABLE_STATUSES = frozenset({408, 409, 429})

_HINTS = {
    400: "the request was rejected; check the options, tools and messages sent",
    401: "authentication failed; check the API key or the Entra ID credential",
    403: "permission denied; check the key's or identity's access (Azure: the 'Cognitive Services OpenAI User' role)",
    404: "not found; check the model or deployment name, the endpoint and the API version",
    422: "the request could not be processed; check the options sent",
}
# OpenAI keys (sk-...), Azure keys (32 hex or long alphanumeric), JWT bearer tokens (eyJ...).


class ModelErrorInfo(BaseModel):
    """The JSON form of a `ModelError` (what an activity reports, what the API shows)."""

    message: str
    status: int | None = None
    code: str | None = None
    retryable: bool = False
    retry_after: float | None = None
    provider: str | None = None
    request_id: str | None = None


class ModelError(Exception):
    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        provider: str | None = None,
        request_id: str | None = None,
        usage: Usage | None = None,
    ) -> None:
        super().__init__(message)
        # What the provider reported (and so billed) for the failed attempt(s), when it reported anything: a run
        # counts it against its budget although the call failed.
        self.usage = usage
        self.message = message
        self.status = status
        self.code = code
        self.retryable = retryable
        self.retry_after = retry_after
        self.provider = provider
        self.request_id = request_id

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions cross process/thread boundaries by pickling; keep every field.
        return (_rebuild, (self.info().model_dump(), self.usage))

    def __repr__(self) -> str:
        return f"ModelError({self.message!r}, status={self.status}, code={self.code!r}, retryable={self.retryable})"

    def info(self) -> ModelErrorInfo:
        return ModelErrorInfo(
            message=self.message,
            status=self.status,
            code=self.code,
            retryable=self.retryable,
            retry_after=self.retry_after,
            provider=self.provider,
            request_id=self.request_id,
        )

    @classmethod
    def from_info(cls, info: ModelErrorInfo | Mapping[str, Any]) -> ModelError:
        data = ModelErrorInfo.model_validate(info).model_dump()
        return cls(data.pop("message"), **data)


def _rebuild(data: dict[str, Any], usage: Usage | None = None) -> ModelError:
    error = ModelError.from_info(data)
    error.usage = usage
    return error


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUSES or status >= 500


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from `retry-after-ms`, `retry-after` (seconds or an HTTP date) or None."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        if "retry-after-ms" in lowered:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000.0)
    except ValueError:
        pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """A model error's text for callers and telemetry (`agent_runtime.redaction`, long opaque tokens included)."""
    return redaction.redact(text, secrets, long_tokens=True)


def _server_message(body: object, fallback: str) -> str:
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(body.get("message"), str):
            return body["message"]
    return fallback


def classify_error(exc: BaseException, *, provider: str = "model", secrets: Iterable[str] = ()) -> ModelError:
    """A `ModelError` for an exception raised by the openai SDK (or while decoding its output)."""
    secrets = tuple(secrets)
    if isinstance(exc, ModelError):
        return exc
    import openai  # deferred: the SDK is loaded by the first model call, not by a cold start (tests/deploy)

    if isinstance(exc, openai.APITimeoutError):
        return ModelError(f"{provider}: the request timed out", code="timeout", retryable=True, provider=provider)
    if isinstance(exc, openai.APIConnectionError):
        cause = f" ({type(exc.__cause__).__name__})" if exc.__cause__ else ""
        return ModelError(
            f"{provider}: could not reach the endpoint{cause}",
            code="connection_error",
            retryable=True,
            provider=provider,
        )
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = redact(_server_message(exc.body, exc.message), secrets)
        hint = _HINTS.get(status)
        message = f"{provider} returned HTTP {status}: {detail}" + (f" ({hint})" if hint else "")
        return ModelError(
            message,
            status=status,
            code=exc.code or _code_for_status(status),
            retryable=is_retryable_status(status),
            retry_after=parse_retry_after(dict(exc.response.headers)),
            provider=provider,
            request_id=exc.request_id,
        )
    if isinstance(exc, openai.APIError):
        # An error event inside a stream, or a response that does not match the API's schema.
        detail = redact(_server_message(exc.body, exc.message), secrets)
        code = exc.code or (
            "invalid_response" if isinstance(exc, openai.APIResponseValidationError) else "stream_error"
        )
        return ModelError(f"{provider}: {detail}", code=code, retryable=True, provider=provider)
    if isinstance(exc, json.JSONDecodeError | ValueError):
        return ModelError(
            f"{provider}: the response was not valid JSON ({type(exc).__name__})",
            code="malformed_response",
            retryable=True,
            provider=provider,
        )
    return ModelError(
        f"{provider}: unexpected {type(exc).__name__}: {redact(str(exc), secrets)}",
        code="unexpected",
        provider=provider,
    )


def _code_for_status(status: int) -> str:
    if status == 429:
        return "rate_limited"
    if status >= 500:
        return "server_error"
    return {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found"}.get(status, f"http_{status}")
