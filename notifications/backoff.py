"""When to try again (sans-IO): exponential backoff from 10 s, capped at an hour, or what `Retry-After` asks; and when
a delivery step that keeps failing itself (not the receiver) is given up."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

FIRST_DELAY_SECONDS = 10.0
MAX_DELAY_SECONDS = 3600.0
MAX_RETRY_AFTER_SECONDS = 6 * 3600.0
# The exponent that reaches the cap: more attempts wait the cap (10.0 * 2**attempt overflows a float at 1024).
MAX_EXPONENT = math.ceil(math.log2(MAX_DELAY_SECONDS / FIRST_DELAY_SECONDS))
# A delivery step that keeps failing (the store unreachable, a bug) is retried on the backoff above for this long, then
# its event is given up, kept for redelivery: as Standard Webhooks senders do after a schedule of about a day or more.
STEP_GIVE_UP_AFTER = timedelta(days=3)


def next_delay(attempt: int, retry_after: str | None = None, *, now: datetime | None = None) -> float:
    """Seconds before attempt `attempt + 1` (attempt counts from 0). A receiver's `Retry-After` (seconds or an HTTP
    date) wins, within six hours."""
    asked = parse_retry_after(retry_after, now=now)
    if asked is not None:
        return min(max(asked, 1.0), MAX_RETRY_AFTER_SECONDS)
    return min(FIRST_DELAY_SECONDS * 2 ** min(max(attempt, 0), MAX_EXPONENT), MAX_DELAY_SECONDS)


def gives_up(failing_since: datetime, now: datetime) -> bool:
    """Has a delivery step been failing itself for long enough to give its event up? (Naive times are UTC: the
    orchestration's clock may come either way, and its input back through JSON.)"""
    return _utc(now) - _utc(failing_since) >= STEP_GIVE_UP_AFTER


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


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
