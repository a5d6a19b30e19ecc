"""Who gets a run's events: the deployment's webhooks, Slack and Teams (settings), and the run's own webhook (given
when it started). Each has a short key (it names the delivery orchestration and the log's entries); the URL itself
never leaves the activities (Slack and Teams URLs are secrets)."""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, SecretStr

from notifications.events import wanted
from notifications.settings import NotificationSettings

Kind = Literal["webhook", "slack", "teams"]
# Chat channels show what needs a person: a message per approval.
CHAT_EVENTS = ["approval.requested", "workflow.gate_opened"]


class Subscription(BaseModel):
    key: str
    kind: Kind
    url: SecretStr
    events: list[str]
    from_run: bool = False
    """Named by the run's caller: checked against the allow list and, when sending, the resolved addresses."""

    def wants(self, event_type: str) -> bool:
        return wanted(event_type, self.events)


def _key(prefix: str, url: str) -> str:
    return f"{prefix}{hashlib.sha256(url.encode()).hexdigest()[:12]}"


def subscriptions(settings: NotificationSettings, run_webhook: str | None) -> list[Subscription]:
    found = [
        Subscription(key=_key("wh", url), kind="webhook", url=SecretStr(url), events=settings.event_filter())
        for url in settings.webhook_url_list()
    ]
    if run_webhook and settings.webhook_secret is not None:
        found.append(Subscription(key=_key("run", run_webhook), kind="webhook", url=SecretStr(run_webhook), events=[],
                                  from_run=True))
    if settings.slack_webhook_url is not None:
        found.append(Subscription(key="slack", kind="slack", url=settings.slack_webhook_url, events=CHAT_EVENTS))
    if settings.teams_webhook_url is not None:
        found.append(Subscription(key="teams", kind="teams", url=settings.teams_webhook_url, events=CHAT_EVENTS))
    return found
