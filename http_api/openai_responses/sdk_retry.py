"""What the openai SDK says of a request it sends again: that it is a retry (`x-stainless-retry-count` > 0), and how
long ago its first attempt can have started at most (from `x-stainless-read-timeout`, sent on every request).

A create without an `Idempotency-Key` is answered with the run its first attempt started only if that run is recent
enough to be that attempt's: the same input sent again later (a client's "regenerate" whose own first attempt wrote
nothing) is a new request, not the retry of a run an hour old. Both headers come from the client: a forged count or
timeout only widens or narrows the look-up among the caller's own runs.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import azure.functions as func

RETRY_COUNT_HEADER = "x-stainless-retry-count"
READ_TIMEOUT_HEADER = "x-stainless-read-timeout"

DEFAULT_READ_TIMEOUT_SECONDS = 600.0
"""The openai SDK's default read timeout (what a client sending no timeout header most likely waited)."""
ATTEMPT_SLACK_SECONDS = 90.0
"""Per attempt beyond its read timeout: connecting and sending, and the SDK's wait before the next attempt (its own
back-off is under 10 s; it honours a `Retry-After` of up to 60 s)."""
MAX_COUNTED_RETRIES = 100
MAX_READ_TIMEOUT_SECONDS = 86_400.0


def is_sdk_retry(req: func.HttpRequest) -> bool:
    return _retry_count(req) > 0


def first_attempt_not_before(req: func.HttpRequest, now: datetime) -> datetime:
    """The earliest time this retry's first attempt can have started: each attempt before it waited at most its read
    timeout and the slack."""
    attempts = _retry_count(req)
    return now - timedelta(seconds=attempts * (_read_timeout(req) + ATTEMPT_SLACK_SECONDS))


def _retry_count(req: func.HttpRequest) -> int:
    """The count, at most `MAX_COUNTED_RETRIES`; 0 unless it is ASCII digits (`str.isdigit` takes "²", which `int`
    refuses, as it refuses over 4,300 digits)."""
    count = req.headers.get(RETRY_COUNT_HEADER, "").strip()
    if not (count.isascii() and count.isdigit()):
        return 0
    return min(int(count[-6:]) if count.lstrip("0")[:-6] == "" else MAX_COUNTED_RETRIES, MAX_COUNTED_RETRIES)


def _read_timeout(req: func.HttpRequest) -> float:
    try:
        timeout = float(req.headers.get(READ_TIMEOUT_HEADER, ""))
    except ValueError:
        return DEFAULT_READ_TIMEOUT_SECONDS
    if not math.isfinite(timeout) or timeout <= 0:
        return DEFAULT_READ_TIMEOUT_SECONDS
    return min(timeout, MAX_READ_TIMEOUT_SECONDS)
