"""One delivery attempt over HTTP: the channel's body, signed for webhooks, POSTed without following redirects (and one
POST of a Slack interaction's update to its `response_url`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

import aiohttp
from pydantic import BaseModel

from notifications.backoff import next_delay
from notifications.destinations import DestinationError, check_run_webhook, public_connector
from notifications.events import NotificationEvent
from notifications.payloads import adaptive_card, slack_message, webhook_body
from notifications.signing import signed_headers
from notifications.subscriptions import Subscription

SEND_TIMEOUT_SECONDS = 15
USER_AGENT = "durable-agents-webhooks/1"


class SendResult(BaseModel):
    outcome: Literal["delivered", "retry", "gone"]
    status: int | None = None
    error: str | None = None
    retry_in_seconds: float | None = None


def request_body(subscription: Subscription, event: NotificationEvent) -> str:
    if subscription.kind == "slack":
        return json.dumps(slack_message(event))
    if subscription.kind == "teams":
        return json.dumps(adaptive_card(event))
    return webhook_body(event)


async def send(
    subscription: Subscription, event: NotificationEvent, *, secrets: list[str], attempt: int, allow_private: bool,
    allowed_hosts: set[str],
) -> SendResult:
    """One attempt. A run's own webhook is checked against `allowed_hosts` (WEBHOOK_ALLOWED_HOSTS now) at every send:
    a host an operator removed since the run started gets nothing more (the delivery ends `gone`)."""
    url = subscription.url.get_secret_value()
    if subscription.from_run:
        try:
            check_run_webhook(url, allowed_hosts)
        except DestinationError as error:
            return SendResult(outcome="gone", error=str(error))
    body = request_body(subscription, event)
    headers = {"content-type": "application/json", "user-agent": USER_AGENT}
    if subscription.kind == "webhook":
        if not secrets:
            return SendResult(outcome="gone", error="WEBHOOK_SECRET is not set")
        headers |= signed_headers(secrets, event.id, datetime.now(UTC), body)
    public_only = subscription.from_run and not allow_private
    return await _attempt(url, body, headers, attempt=attempt, public_only=public_only,
                          gone=lambda status: status == 410)


async def post_slack_response(url: str, message: dict[str, Any], *, attempt: int) -> SendResult:
    """One POST to a Slack interaction's `response_url` (Slack's own URL, from a verified request). Slack answers 404
    once it expired (after 30 minutes) or was used up, so only a network error, 429 and 5xx are worth another try."""
    headers = {"content-type": "application/json", "user-agent": USER_AGENT}
    return await _attempt(url, json.dumps(message), headers, attempt=attempt, public_only=False,
                          gone=lambda status: status != 429 and status < 500)


async def _attempt(
    url: str, body: str, headers: dict[str, str], *, attempt: int, public_only: bool, gone: Callable[[int], bool]
) -> SendResult:
    """One POST, as an outcome: delivered (2xx), gone (a refused destination, or a status `gone` says no retry can
    fix) or retry (a network error or any other status, after `next_delay`)."""
    try:
        status, retry_after = await _post(url, body, headers, public_only=public_only)
    except DestinationError as error:
        return SendResult(outcome="gone", error=str(error))
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as error:
        # The error's type only: its text may contain the URL (a secret for Slack and Teams). ValueError: a URL
        # aiohttp cannot encode (`http://a..b/`) - retried, then given up, like any failure.
        return SendResult(outcome="retry", error=type(error).__name__, retry_in_seconds=next_delay(attempt))
    if 200 <= status < 300:
        return SendResult(outcome="delivered", status=status)
    if gone(status):
        error = "the receiver answered 410 Gone" if status == 410 else f"HTTP {status}"
        return SendResult(outcome="gone", status=status, error=error)
    return SendResult(outcome="retry", status=status, error=f"HTTP {status}",
                      retry_in_seconds=next_delay(attempt, retry_after))


async def _post(url: str, body: str, headers: dict[str, str], *, public_only: bool) -> tuple[int, str | None]:
    """(status, Retry-After). `public_only`: connect only to public addresses, checked as they are resolved for this
    connection (`destinations.public_connector`); the body of the answer is never read."""
    connector = public_connector(url) if public_only else None
    timeout = aiohttp.ClientTimeout(total=SEND_TIMEOUT_SECONDS)  # the DNS lookup included
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session, session.post(
        url, data=body.encode(), headers=headers, allow_redirects=False
    ) as response:
        return response.status, response.headers.get("retry-after")
