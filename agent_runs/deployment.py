"""Where the app runs and how it is configured: the production guards and what `GET /api/health` reports.

On Azure (the platform sets `WEBSITE_INSTANCE_ID` on every instance) the app refuses to start with the choices that
only make sense on a laptop, instead of falling back to them silently:

- the SQLite store (no `COSMOS_ENDPOINT`): set `COSMOS_ENDPOINT`, or `SESSION_STORE=sqlite` on purpose (a warning);
- the offline demo model (`MODEL_PROVIDER=auto` found no model): configure a model, or `MODEL_PROVIDER=scripted` on
  purpose (a warning);
- no `CONTINUATION_TOKEN_SECRET`: set it (the infrastructure keeps it in Key Vault).

Who may call is checked too (the app refuses to start, naming the settings):

- an `AUTH_MODE` that is not one of `none`, `easyauth`, `jwt` (anywhere: a typo must not become a 500 on every route),
  or `jwt` without `AUTH_ISSUER` and `AUTH_AUDIENCE`, or `jwt` that would accept any client application of the
  issuer (no `AUTH_REQUIRED_SCOPES` nor `AUTH_REQUIRED_APP_ROLES`) unless `AUTH_ACCEPT_ANY_CLIENT=true` says so;
- on Azure, `AUTH_MODE=easyauth` unless App Service Authentication is on (the platform then sets
  `WEBSITE_AUTH_ENABLED=True`): without it nothing strips a hand-made `X-MS-CLIENT-PRINCIPAL` header, so anyone
  could claim any identity;
- on Azure, `AUTH_MODE=none` unless `ALLOW_ANONYMOUS_ON_AZURE=true` says so on purpose (then a warning): every
  function-key holder is one principal and separation of duties cannot tell people apart.

The durable backend is what the
Functions host will use: `host.json` `extensions.durableTask.storageProvider.type`, unless the app setting
`AzureFunctionsJobHost__extensions__durableTask__storageProvider__type` overrides it (as the host does). The durable
engine says who actually runs the orchestrations: `devhost` when devhost runs the app (it sets `DEVHOST_ENGINE` for
the app; its own engine stands in for the configured backend), else `functions-host` (the Functions host's Durable
extension on the configured backend: on Azure, or under Core Tools).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent_runs.settings import RunSettings
from agent_runtime.settings import ModelSettings
from session_store import StoreSettings

DURABLE_BACKEND_SETTING = "AzureFunctionsJobHost__extensions__durableTask__storageProvider__type"
# The Durable extension's backend when host.json names none.
DEFAULT_DURABLE_BACKEND = "AzureStorage"
# Set by devhost in the environment of the app it runs (never by a user; Azure never sets it).
DEVHOST_ENGINE_SETTING = "DEVHOST_ENGINE"
APP_DIR = Path(__file__).resolve().parent.parent
# How callers are authenticated (`http_api/identity.py`); `AUTH_MODE` is read case-insensitively.
AuthMode = Literal["none", "easyauth", "jwt"]
AUTH_MODES: tuple[str, ...] = get_args(AuthMode)
ALLOW_ANONYMOUS_SETTING = "ALLOW_ANONYMOUS_ON_AZURE"
ACCEPT_ANY_CLIENT_SETTING = "AUTH_ACCEPT_ANY_CLIENT"
JWT_ACCEPTS_ANY_CLIENT = (
    "AUTH_MODE=jwt accepts every token the issuer makes for AUTH_AUDIENCE: on Entra ID any client application of the "
    "tenant can get one (an app-only token carries no scope and no role)"
)


def normalized_auth_mode(value: str | None) -> str:
    return (value or "").strip().lower() or "none"


def setting_values(raw: str | None) -> tuple[str, ...]:
    """The values of a list setting, separated by spaces and/or commas (duplicates dropped, order kept)."""
    return tuple(dict.fromkeys(value for value in re.split(r"[\s,]+", raw or "") if value))


def assess_jwt_clients(
    scopes: str | None, app_roles: str | None, accept_any_client: bool
) -> tuple[list[str], list[str]]:
    """(errors, warnings) of `AUTH_MODE=jwt`'s client checks: requiring no scope and no app role accepts every client
    application of the issuer, which refuses to start unless `AUTH_ACCEPT_ANY_CLIENT=true` says so (then a warning)."""
    if setting_values(scopes) or setting_values(app_roles):
        return [], []
    if accept_any_client:
        return [], [f"{JWT_ACCEPTS_ANY_CLIENT}, on purpose ({ACCEPT_ANY_CLIENT_SETTING}=true)"]
    return [
        f"{JWT_ACCEPTS_ANY_CLIENT}. Set AUTH_REQUIRED_SCOPES (a delegated token must carry one in `scp`) and/or "
        f"AUTH_REQUIRED_APP_ROLES (an app-only token must carry one in `roles`), or set "
        f"{ACCEPT_ANY_CLIENT_SETTING}=true to accept any client on purpose."
    ], []


class DeploymentSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, env_ignore_empty=True)

    website_instance_id: str | None = Field(
        default=None, validation_alias="WEBSITE_INSTANCE_ID",
        description="set by Azure App Service / Functions on every instance: the app runs on Azure",
    )
    auth_mode: str = Field(
        default="none", validation_alias="AUTH_MODE", description="how callers are authenticated (`none`: not at all)"
    )
    auth_issuer: str | None = Field(
        default=None, validation_alias="AUTH_ISSUER", description="`AUTH_MODE=jwt`: the token issuer to trust"
    )
    auth_audience: str | None = Field(
        default=None, validation_alias="AUTH_AUDIENCE", description="`AUTH_MODE=jwt`: the audience tokens must name"
    )
    auth_required_scopes: str | None = Field(
        default=None, validation_alias="AUTH_REQUIRED_SCOPES",
        description="`AUTH_MODE=jwt`: a delegated token must carry one of these scopes (`scp`)",
    )
    auth_required_app_roles: str | None = Field(
        default=None, validation_alias="AUTH_REQUIRED_APP_ROLES",
        description="`AUTH_MODE=jwt`: an app-only token must carry one of these app roles (`roles`)",
    )
    auth_accept_any_client: bool = Field(
        default=False, validation_alias=ACCEPT_ANY_CLIENT_SETTING,
        description="`true`: start `AUTH_MODE=jwt` with no scope or app role required, on purpose",
    )
    website_auth_enabled: str | None = Field(
        default=None, validation_alias="WEBSITE_AUTH_ENABLED",
        description="set by Azure to `True` when App Service Authentication (Easy Auth) is on in front of the app",
    )
    allow_anonymous_on_azure: bool = Field(
        default=False, validation_alias=ALLOW_ANONYMOUS_SETTING,
        description="`true`: start on Azure with `AUTH_MODE=none` on purpose (every function-key holder is one caller)",
    )
    website_hostname: str | None = Field(
        default=None, validation_alias="WEBSITE_HOSTNAME",
        description="set by Azure: the app's default host name (`<app>.azurewebsites.net`); links use it on Azure",
    )
    public_base_url: str | None = Field(
        default=None, validation_alias="PUBLIC_BASE_URL",
        description="the URL clients reach the app at (a custom domain, a gateway): links use it wherever the app runs",
    )
    taskhub_name: str | None = Field(
        default=None, validation_alias="TASKHUB_NAME", description="the Durable task hub (host.json `%TASKHUB_NAME%`)"
    )
    durable_backend: str | None = Field(
        default=None, validation_alias=DURABLE_BACKEND_SETTING,
        description="overrides host.json's durable storage provider type (`azureManaged` or `AzureStorage`)",
    )
    devhost_engine: str | None = Field(
        default=None, validation_alias=DEVHOST_ENGINE_SETTING,
        description="set by devhost for the app it runs: its own engine runs the orchestrations",
    )

    @property
    def on_azure(self) -> bool:
        return bool(self.website_instance_id)

    @field_validator("public_base_url")
    @classmethod
    def _absolute_http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
            raise ValueError("PUBLIC_BASE_URL must be an absolute http(s) URL without query or fragment")
        return value.strip().rstrip("/")

    @property
    def link_base(self) -> str | None:
        """Where links (`Location`, `links`) point: `PUBLIC_BASE_URL`, else on Azure `https://<WEBSITE_HOSTNAME>`;
        None locally (devhost, `func start`: the request's own URL is right there). Never the request's `Host`
        header on Azure: a caller could otherwise make the app hand out links to a host of its choosing."""
        if self.public_base_url:
            return self.public_base_url
        if self.on_azure and self.website_hostname:
            return f"https://{self.website_hostname.strip()}"
        return None

    @property
    def app_service_auth_enabled(self) -> bool:
        return (self.website_auth_enabled or "").strip().lower() == "true"
    @property
    def durable_engine(self) -> Literal["devhost", "functions-host"]:
        return "devhost" if self.devhost_engine else "functions-host"


class DeploymentReport(BaseModel):
    on_azure: bool
    durable_backend: str
    durable_engine: Literal["devhost", "functions-host"]
    task_hub: str | None
    store: Literal["cosmos", "sqlite"]
    model_provider: str
    auth_mode: str
    warnings: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)


class DeploymentConfigurationError(RuntimeError):
    """The app must not start with these settings; the message names each setting and what to set."""

    def __init__(self, report: DeploymentReport) -> None:
        where = " on Azure" if report.on_azure else ""
        super().__init__(f"Refusing to start{where}: " + " ".join(report.errors))
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
    auth_mode = normalized_auth_mode(deployment.auth_mode)
    auth_errors, auth_warnings = assess_auth(auth_mode, deployment)
    errors += auth_errors
    warnings += auth_warnings
    return DeploymentReport(
        on_azure=on_azure,
        durable_backend=durable_backend(app_dir, deployment),
        durable_engine=deployment.durable_engine,
        task_hub=deployment.taskhub_name,
        store="cosmos" if store.uses_cosmos else "sqlite",
        model_provider=provider,
        auth_mode=auth_mode,
        warnings=warnings,
        errors=errors,
    )


def assess_auth(auth_mode: str, deployment: DeploymentSettings) -> tuple[list[str], list[str]]:
    """(errors, warnings) of the auth settings: a mode that does not exist, or one that lets callers forge identities
    on Azure, refuses to start."""
    if auth_mode not in AUTH_MODES:
        return [
            f"AUTH_MODE={deployment.auth_mode.strip()!r} is not a known mode: set AUTH_MODE to one of "
            + ", ".join(AUTH_MODES) + "."
        ], []
    if auth_mode == "jwt" and not (deployment.auth_issuer and deployment.auth_audience):
        return ["AUTH_MODE=jwt needs AUTH_ISSUER and AUTH_AUDIENCE (the issuer whose tokens to trust, and the "
                "audience they must be issued for)."], []
    if auth_mode == "jwt":
        return assess_jwt_clients(
            deployment.auth_required_scopes, deployment.auth_required_app_roles, deployment.auth_accept_any_client
        )
    if not deployment.on_azure:
        return [], []
    if auth_mode == "easyauth" and not deployment.app_service_auth_enabled:
        return [
            "AUTH_MODE=easyauth but App Service Authentication is off (WEBSITE_AUTH_ENABLED is not True): nothing in "
            "front of the app validates callers or strips X-MS-CLIENT-PRINCIPAL headers, so any caller could claim "
            "any identity. Switch App Service Authentication on (the infrastructure does it for authMode=easyauth), "
            "or set AUTH_MODE=jwt."
        ], []
    if auth_mode == "none":
        if not deployment.allow_anonymous_on_azure:
            return [
                f"AUTH_MODE=none: the app would tell no caller apart (every function-key holder may see and decide "
                f"everything; separation of duties does nothing). Set AUTH_MODE=easyauth (with App Service "
                f"Authentication) or AUTH_MODE=jwt, or set {ALLOW_ANONYMOUS_SETTING}=true to run without "
                f"identities on purpose."
            ], []
        return [], [
            f"AUTH_MODE=none: the app itself authenticates no caller, on purpose ({ALLOW_ANONYMOUS_SETTING}=true); "
            "function keys and App Service Authentication, if switched on, still apply"
        ]
    return [], []


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
