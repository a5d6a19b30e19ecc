"""App settings of notifications (environment / Functions app settings / local.settings.json `Values`).

| variable | meaning | default |
|---|---|---|
| `WEBHOOK_URLS` | deployment-wide webhook subscriptions, comma-separated | none |
| `WEBHOOK_SECRET` | the signing secret (`whsec_` + base64); `new,previous` while rotating | none (webhooks off) |
| `WEBHOOK_EVENTS` | only these event types, comma-separated (`approval.*` style prefixes allowed) | all |
| `WEBHOOK_ALLOWED_HOSTS` | hosts a run's own `webhook` URL may name, comma-separated | none (per-run webhooks off) |
| `WEBHOOK_ALLOW_PRIVATE_ADDRESSES` | on Azure, allow private/loopback destinations | `false` |
| `WEBHOOK_INCLUDE_ARGUMENTS` | include tool arguments in events | `false` |
| `WEBHOOK_MAX_ATTEMPTS` | attempts per event before it is given up | `20` (about 12 hours) |
| `DECISION_LINK_TTL_SECONDS` | the longest a decision page link stays valid | `604800` |
| `SLACK_WEBHOOK_URL` | a Slack incoming webhook: one message per approval | none |
| `SLACK_SIGNING_SECRET` | verifies Slack's interaction requests | none (Slack buttons refused) |
| `SLACK_APPROVERS` | Slack user id -> approver identity, `U123=alice@contoso.com/role1 role2,...` | none |
| `TEAMS_WEBHOOK_URL` | a Teams Workflows "webhook request received" URL: one Adaptive Card per approval | none |
"""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def split_list(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


class NotificationSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, env_ignore_empty=True)

    webhook_urls: SecretStr | None = Field(default=None, validation_alias="WEBHOOK_URLS")
    webhook_secret: SecretStr | None = Field(default=None, validation_alias="WEBHOOK_SECRET")
    webhook_events: str | None = Field(default=None, validation_alias="WEBHOOK_EVENTS")
    webhook_allowed_hosts: str | None = Field(default=None, validation_alias="WEBHOOK_ALLOWED_HOSTS")
    webhook_allow_private_addresses: bool = Field(default=False, validation_alias="WEBHOOK_ALLOW_PRIVATE_ADDRESSES")
    webhook_include_arguments: bool = Field(default=False, validation_alias="WEBHOOK_INCLUDE_ARGUMENTS")
    webhook_max_attempts: int = Field(default=20, ge=1, le=100, validation_alias="WEBHOOK_MAX_ATTEMPTS")
    decision_link_ttl_seconds: int = Field(default=604800, gt=0, validation_alias="DECISION_LINK_TTL_SECONDS")
    slack_webhook_url: SecretStr | None = Field(default=None, validation_alias="SLACK_WEBHOOK_URL")
    slack_signing_secret: SecretStr | None = Field(default=None, validation_alias="SLACK_SIGNING_SECRET")
    slack_approvers: str | None = Field(default=None, validation_alias="SLACK_APPROVERS")
    teams_webhook_url: SecretStr | None = Field(default=None, validation_alias="TEAMS_WEBHOOK_URL")

    # URLs are secrets (Teams and Slack URLs carry their own signature), hence SecretStr: never in logs or spans.
    def webhook_url_list(self) -> list[str]:
        if self.webhook_urls is None or self.webhook_secret is None:
            return []
        return split_list(self.webhook_urls.get_secret_value())

    def webhook_secrets(self) -> list[str]:
        """The signing secrets, the current first; during a rotation the previous ones follow (comma-separated)."""
        return split_list(self.webhook_secret.get_secret_value()) if self.webhook_secret is not None else []

    def event_filter(self) -> list[str]:
        return split_list(self.webhook_events)

    def allowed_hosts(self) -> set[str]:
        return {host.lower() for host in split_list(self.webhook_allowed_hosts)}

    def slack_user_map(self) -> dict[str, tuple[str, list[str]]]:
        """Slack user id -> (approver id, roles)."""
        mapped: dict[str, tuple[str, list[str]]] = {}
        for entry in split_list(self.slack_approvers):
            slack_id, _, identity = entry.partition("=")
            principal, _, roles = identity.partition("/")
            if slack_id.strip() and principal.strip():
                mapped[slack_id.strip()] = (principal.strip(), roles.split())
        return mapped

    def any_channel(self) -> bool:
        """Is any deployment-wide channel configured (so every run records its events)?"""
        return bool(self.webhook_url_list() or self.slack_webhook_url or self.teams_webhook_url)
