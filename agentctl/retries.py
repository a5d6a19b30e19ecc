"""When `agentctl` sends a request again, and after how long: the policy only (no I/O; `client.AgentsClient` sends).

The app answers a problem that passes on its own with 503 or 429 and a `Retry-After` (the store throttled, a
decision or cancel stored whose event the task hub refused, the run changing too fast to flag its cancel), or 409
with a `Retry-After` (the first request with the same `Idempotency-Key` is still starting its run). Each of those
says "send the same request again": the decision routes apply a decision once however often it arrives, a cancel is
sticky, and every start `agentctl` sends carries an `Idempotency-Key`, so a start sent twice starts one run. So the
client sends it again itself, a few times, rather than print "try again" to a person. A connection that broke after
the request went out (the app's host restarting) is as temporary, for the requests safe to repeat that way.
"""

from __future__ import annotations

from collections.abc import Mapping

ATTEMPTS = 4  # the first and three more: covers a host restarting or a store throttled for a few seconds
MAX_WAIT_SECONDS = 10.0  # a longer Retry-After is the app saying "not soon": the person hears it instead
FIRST_BACKOFF_SECONDS = 0.5  # where the answer names no wait, or the connection broke: 0.5, 1, 2


def wait_before_retry(status: int, headers: Mapping[str, str], attempt: int) -> float | None:
    """Seconds to wait before sending a request again whose `attempt`-th try got this answer; None: do not."""
    if attempt >= ATTEMPTS or 200 <= status < 400:  # a 202 has a Retry-After too: "poll again", not "resend"
        return None
    retry_after = headers.get("retry-after")
    if status not in (429, 503) and retry_after is None:
        return None
    if retry_after is None:
        return backoff(attempt)
    try:
        seconds = float(retry_after)  # the app sends delta-seconds (an HTTP date is not worth the wait)
    except ValueError:
        return backoff(attempt)
    return seconds if 0 <= seconds <= MAX_WAIT_SECONDS else None


def wait_after_broken_connection(attempt: int) -> float | None:
    return backoff(attempt) if attempt < ATTEMPTS else None


def backoff(attempt: int) -> float:
    return FIRST_BACKOFF_SECONDS * 2 ** (attempt - 1)
