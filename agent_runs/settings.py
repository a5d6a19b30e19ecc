"""App settings of the durable agent runs (environment / Functions app settings / local.settings.json `Values`).

| variable | meaning | default |
|---|---|---|
| `CONTINUATION_TOKEN_SECRET` | HMAC secrets, comma-separated (first signs) | dev secret; required in Azure |
| `CONTINUATION_TOKEN_TTL_SECONDS` | how long a continuation token stays valid | `86400` |
| `DEFAULT_APPROVAL_TIMEOUT_SECONDS` | how long approvals wait when neither the request nor the agent says | `86400` |
| `DECISION_REDELIVERY_SECONDS` | a decision its run has not applied this long is delivered again by a poll | `5` |
| `AGENTS_PACKAGE` | the package whose modules define the served agents | `served_agents` |
| `WORKFLOWS_PACKAGE` | served workflows (`none`: none) | `served_workflows` (with the shipped agents) |
| `STREAM_PARTIAL_OUTPUT` | stream model answers and show the text so far to pollers (`partial_output`) | `true` |
| `PARTIAL_OUTPUT_INTERVAL_SECONDS` | the first draft write's interval while a model answer streams | `0.5` |
| `PARTIAL_OUTPUT_MAX_INTERVAL_SECONDS` | the interval grows 1.5x a write up to this (a write: ~6-7 RU) | `2.0` |

Model settings: `agent_runtime.settings`; store settings: `session_store.settings`.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

log = logging.getLogger(__name__)

# Public on purpose: only ever used when no secret is configured outside Azure (devhost / func start on a laptop).
DEVELOPMENT_TOKEN_SECRET = "durable-agents-development-secret-do-not-use-in-production"


class PackageSettings(BaseSettings):
    """Which packages define what the app serves (read apart from the rest by `workflow_runtime.registry`)."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, env_ignore_empty=True)

    agents_package: str = Field(default="served_agents", validation_alias="AGENTS_PACKAGE")
    workflows_package: str | None = Field(default=None, validation_alias="WORKFLOWS_PACKAGE")


class RunSettings(PackageSettings):
    """Everything the durable agent runs read (the packages included)."""

    continuation_token_secret: SecretStr | None = Field(default=None, validation_alias="CONTINUATION_TOKEN_SECRET")
    continuation_token_ttl_seconds: int = Field(default=86400, gt=0, validation_alias="CONTINUATION_TOKEN_TTL_SECONDS")
    default_approval_timeout_seconds: float = Field(
        default=86400, gt=0, validation_alias="DEFAULT_APPROVAL_TIMEOUT_SECONDS"
    )
    decision_redelivery_seconds: float = Field(default=5, ge=0, validation_alias="DECISION_REDELIVERY_SECONDS")
    """Long enough that a normal delivery (event, episode, apply step) is never rung twice; short enough that nobody
    waits for long when the first ring failed."""
    stream_partial_output: bool = Field(default=True, validation_alias="STREAM_PARTIAL_OUTPUT")
    partial_output_interval_seconds: float = Field(
        default=0.5, ge=0, validation_alias="PARTIAL_OUTPUT_INTERVAL_SECONDS"
    )
    partial_output_max_interval_seconds: float = Field(
        default=2.0, ge=0, validation_alias="PARTIAL_OUTPUT_MAX_INTERVAL_SECONDS"
    )
    cancel_grace_seconds: float = Field(default=30, ge=0, validation_alias="CANCEL_GRACE_SECONDS")
    """How long a cancelled run waits for its step in flight before abandoning it."""

    @property
    def decision_redelivery_after(self) -> timedelta:
        return timedelta(seconds=self.decision_redelivery_seconds)

    def token_secrets(self, *, on_azure: bool) -> list[str]:
        """The signing secrets; without one the public development secret, except on Azure (`on_azure`:
        `DeploymentSettings.on_azure`), where a guessable secret would let anyone forge tokens."""
        if self.continuation_token_secret is not None:
            secrets = [s.strip() for s in self.continuation_token_secret.get_secret_value().split(",") if s.strip()]
            if secrets:
                return secrets
        if on_azure:
            raise ValueError("CONTINUATION_TOKEN_SECRET must be set in Azure (a long random string)")
        log.warning("CONTINUATION_TOKEN_SECRET is not set: using the public development secret")
        return [DEVELOPMENT_TOKEN_SECRET]
