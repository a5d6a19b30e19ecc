"""Where the app runs and how it is configured: the production guards and what `GET /api/health` reports.

On Azure (the platform sets `WEBSITE_INSTANCE_ID` on every instance) the app refuses to start with the choices that
only make sense on a laptop, instead of falling back to them silently:

- the SQLite store (no `COSMOS_ENDPOINT`): set `COSMOS_ENDPOINT`, or `SESSION_STORE=sqlite` on purpose (a warning);
- the offline demo model (`MODEL_PROVIDER=auto` found no model): configure a model, or `MODEL_PROVIDER=scripted` on
  purpose (a warning);
- no `CONTINUATION_TOKEN_SECRET`: set it (the infrastructure keeps it in Key Vault).

`AUTH_MODE` (default `none`) is reported, and warned about on Azure when `none`. The durable backend is what the
Functions host will use: `host.json` `extensions.durableTask.storageProvider.type`, unless the app setting
`AzureFunctionsJobHost__extensions__durableTask__storageProvider__type` overrides it (as the host does).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent_runs.settings import RunSettings
from agent_runtime.settings import ModelSettings
from session_store import StoreSettings

DURABLE_BACKEND_SETTING = "AzureFunctionsJobHost__extensions__durableTask__storageProvider__type"
# The Durable extension's backend when host.json names none.
DEFAULT_DURABLE_BACKEND = "AzureStorage"
APP_DIR = Path(__file__).resolve().parent.parent


class DeploymentSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, env_ignore_empty=True)

    website_instance_id: str | None = Field(
        default=None, validation_alias="WEBSITE_INSTANCE_ID",
        description="set by Azure App Service / Functions on every instance: the app runs on Azure",
    )
    auth_mode: str = Field(
        default="none", validation_alias="AUTH_MODE", description="how callers are authenticated (`none`: not at all)"
    )
    taskhub_name: str | None = Field(
        default=None, validation_alias="TASKHUB_NAME", description="the Durable task hub (host.json `%TASKHUB_NAME%`)"
    )
    durable_backend: str | None = Field(
        default=None, validation_alias=DURABLE_BACKEND_SETTING,
        description="overrides host.json's durable storage provider type (`azureManaged` or `AzureStorage`)",
    )

    @property
    def on_azure(self) -> bool:
        return bool(self.website_instance_id)


class DeploymentReport(BaseModel):
    on_azure: bool
    durable_backend: str
    task_hub: str | None
    store: Literal["cosmos", "sqlite"]
    model_provider: str
    auth_mode: str
    warnings: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)


class DeploymentConfigurationError(RuntimeError):
    """The app must not start with these settings; the message names each setting and what to set."""

    def __init__(self, report: DeploymentReport) -> None:
        super().__init__("Refusing to start on Azure: " + " ".join(report.errors))
        self.report = report


def assess(
    *,
    deployment: DeploymentSettings,
    store: StoreSettings,
    model: ModelSettings,
    run: RunSettings,
    app_dir: Path = APP_DIR,
) -> DeploymentReport:
    on_azure = deployment.on_azure
    warnings: list[str] = []
    errors: list[str] = []
    if on_azure and not store.uses_cosmos:
        if store.session_store == "sqlite":
            warnings.append(
                "SESSION_STORE=sqlite: sessions live in a SQLite file on this instance's local disk; they are not "
                "shared by other instances and are lost when the instance goes; set COSMOS_ENDPOINT for production"
            )
        else:
            errors.append(
                "No COSMOS_ENDPOINT: the SQLite store keeps sessions on one instance's local disk. Set COSMOS_ENDPOINT "
                "(and grant the app's identity 'Cosmos DB Built-in Data Contributor'), or set SESSION_STORE=sqlite to "
                "use SQLite on purpose."
            )
    provider = model.resolved_provider
    if on_azure and provider == "scripted":
        if model.provider == "scripted":
            warnings.append("MODEL_PROVIDER=scripted: this app answers with the scripted demo model, not a real one")
        else:
            errors.append(
                "No model configured (MODEL_PROVIDER=auto found no AZURE_OPENAI_ENDPOINT, OPENAI_BASE_URL or "
                "OPENAI_API_KEY), so the offline demo model would answer. Set AZURE_OPENAI_ENDPOINT and "
                "AZURE_OPENAI_DEPLOYMENT (or OPENAI_API_KEY, or OPENAI_BASE_URL), or set MODEL_PROVIDER=scripted to "
                "serve the demo model on purpose."
            )
    if run.continuation_token_secret is None or not run.continuation_token_secret.get_secret_value().strip():
        if on_azure:
            errors.append(
                "No CONTINUATION_TOKEN_SECRET: set it to a long random string (a Key Vault reference in production) "
                "so continuation tokens cannot be forged."
            )
        else:
            warnings.append(
                "CONTINUATION_TOKEN_SECRET is not set: tokens are signed with the public development secret"
            )
    auth_mode = deployment.auth_mode.strip().lower() or "none"
    if on_azure and auth_mode == "none":
        warnings.append(
            "AUTH_MODE=none: the app itself authenticates no caller (function keys and App Service Authentication, "
            "if switched on, still apply)"
        )
    return DeploymentReport(
        on_azure=on_azure,
        durable_backend=durable_backend(app_dir, deployment),
        task_hub=deployment.taskhub_name,
        store="cosmos" if store.uses_cosmos else "sqlite",
        model_provider=provider,
        auth_mode=auth_mode,
        warnings=warnings,
        errors=errors,
    )


def durable_backend(app_dir: Path, deployment: DeploymentSettings) -> str:
    """The Durable storage provider the Functions host is configured with (the app setting wins over host.json)."""
    if deployment.durable_backend:
        return deployment.durable_backend
    try:
        document: Any = json.loads((app_dir / "host.json").read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return DEFAULT_DURABLE_BACKEND
    provider = _section(_section(_section(document, "extensions"), "durableTask"), "storageProvider")
    value = _value(provider, "type")
    return value if isinstance(value, str) and value else DEFAULT_DURABLE_BACKEND


def _section(parent: Any, name: str) -> dict[str, Any]:
    value = _value(parent, name)
    return value if isinstance(value, dict) else {}


def _value(parent: Any, name: str) -> Any:
    # host.json keys are case-insensitive in the Functions host.
    if isinstance(parent, dict):
        for key, value in parent.items():
            if key.lower() == name.lower():
                return value
    return None
