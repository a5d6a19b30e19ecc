"""The `webhook` field of a start request: refused with 400 naming the field unless its host is allowed."""

from __future__ import annotations

from agent_runs.services import RunServices
from agent_runtime.settings_snapshot import current_settings
from http_api.problems import ApiProblem
from notifications.destinations import DestinationError, check_resolved, check_run_webhook
from notifications.settings import NotificationSettings


async def checked_webhook(url: str | None, field: str = "body.webhook", *, resolve: bool = True) -> str | None:
    """The URL if allowed. On Azure its host must also resolve to public addresses only (checked again at each send,
    `notifications.sender`), unless `WEBHOOK_ALLOW_PRIVATE_ADDRESSES`; `resolve=False` leaves that look-up to the
    sends (for a URL whose host was resolved and found public when its run was stored)."""
    if url is None:
        return None
    settings = current_settings(NotificationSettings)
    on_azure = RunServices.current().deployment_settings.on_azure
    try:
        check_run_webhook(url, settings.allowed_hosts())
        if resolve:
            await check_resolved(url, allow_private=settings.webhook_allow_private_addresses or not on_azure)
    except DestinationError as error:
        raise ApiProblem(400, "webhook_not_allowed", "The webhook URL is not allowed", f"{field} {error}",
                         field=field) from error
    if settings.webhook_secret is None:
        raise ApiProblem(400, "webhook_not_allowed", "The webhook URL is not allowed",
                         f"{field}: webhooks are not enabled (WEBHOOK_SECRET is not set)", field=field)
    return url
