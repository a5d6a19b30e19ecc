"""When to try again (sans-IO): exponential backoff from 10 s, capped at an hour, or what `Retry-After` asks."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

FIRST_DELAY_SECONDS = 10.0
MAX_DELAY_SECONDS = 3600.0
MAX_RETRY_AFTER_SECONDS = 6 * 3600.0


def next_delay(attempt: int, retry_after: str | None = None, *, now: datetime | None = None) -> float:
    """Seconds before attempt `attempt + 1` (attempt counts from 0). A receiver's `Retry-After` (seconds or an HTTP
    date) wins, within six hours."""
    asked = parse_retry_after(retry_after, now=now)
    if asked is not None:
        return min(max(asked, 1.0), MAX_RETRY_AFTER_SECONDS)
    return min(FIRST_DELAY_SECONDS * 2**attempt, MAX_DELAY_SECONDS)


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)
