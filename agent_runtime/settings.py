"""Model settings from environment variables (or `local.settings.json` Values, which the host puts in the env).

| variable | meaning | default |
|---|---|---|
| `MODEL_PROVIDER` | `openai`, `azure_openai`, `compatible`, `scripted` or `auto` | `auto` |
| `MODEL_NAME` | model (OpenAI / compatible); Azure deployment if `AZURE_OPENAI_DEPLOYMENT` unset | `gpt-4o-mini` |
| `OPENAI_API_KEY` | OpenAI key (also sent to a compatible endpoint when set) | - |
| `OPENAI_BASE_URL` | OpenAI-compatible endpoint, e.g. `http://localhost:11434/v1` | - |
| `OPENAI_ORG_ID` | OpenAI organization | - |
| `AZURE_OPENAI_ENDPOINT` | `https://<resource>.openai.azure.com/` | - |
| `AZURE_OPENAI_DEPLOYMENT` | deployment name | `MODEL_NAME` |
| `AZURE_OPENAI_API_VERSION` | API version | `2024-10-21` |
| `AZURE_OPENAI_API_KEY` | key; unset = Entra ID (`DefaultAzureCredential`, "Cognitive Services OpenAI User") | - |
| `SCRIPTED_MODEL_URL` | base URL of a running scripted model server (`.../v1`); the app starts one when unset | - |
| `MODEL_TIMEOUT_SECONDS` | per-request timeout | `120` |
| `MODEL_RETRY_MAX_ATTEMPTS` | attempts per model call, first included (our `RetryPolicy`; SDK retries are off) | `4` |
| `MODEL_RETRY_INITIAL_DELAY` / `MODEL_RETRY_MAX_DELAY` | backoff bounds in seconds | `0.5` / `20` |
| `MODEL_RETRY_MAX_RETRY_AFTER` | longest server `Retry-After` waited in-process, seconds | `60` |
| `MODEL_PRICES` | JSON `{"<model>": {"input": <per 1M>, "output": <per 1M>}}` (`agent_runtime.spend`) | - |

`auto` picks `azure_openai` when `AZURE_OPENAI_ENDPOINT` is set, else `openai` when `OPENAI_API_KEY` is set (or
`compatible` when `OPENAI_BASE_URL` is set too, or alone), else `scripted` (the offline demo brain).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .models.retry import RetryPolicy
from .spend import ModelPrices

if TYPE_CHECKING:  # the client (and the openai SDK under it) is imported by the first model call, not at start-up
    from .models.openai_client import OpenAIChatClient

Provider = Literal["openai", "azure_openai", "compatible", "scripted"]
SCRIPTED_MODEL_NAME = "scripted-model"


class ModelConfigurationError(ValueError):
    """The model settings cannot work; the message names the variables to set."""


class ModelSettings(BaseSettings):
    model_config = SettingsConfigDict(
        extra="ignore", case_sensitive=False, populate_by_name=True, env_ignore_empty=True
    )

    provider: Provider | Literal["auto"] = Field(default="auto", validation_alias="MODEL_PROVIDER")
    model_name: str = Field(default="gpt-4o-mini", validation_alias=AliasChoices("MODEL_NAME", "OPENAI_MODEL"))
    openai_api_key: SecretStr | None = Field(default=None, validation_alias="OPENAI_API_KEY")
    openai_base_url: str | None = Field(default=None, validation_alias="OPENAI_BASE_URL")
    openai_org_id: str | None = Field(default=None, validation_alias="OPENAI_ORG_ID")
    azure_endpoint: str | None = Field(default=None, validation_alias="AZURE_OPENAI_ENDPOINT")
    azure_deployment: str | None = Field(default=None, validation_alias="AZURE_OPENAI_DEPLOYMENT")
    azure_api_version: str = Field(default="2024-10-21", validation_alias="AZURE_OPENAI_API_VERSION")
    azure_api_key: SecretStr | None = Field(default=None, validation_alias="AZURE_OPENAI_API_KEY")
    scripted_model_url: str | None = Field(default=None, validation_alias="SCRIPTED_MODEL_URL")
    timeout_seconds: float = Field(default=120.0, gt=0, validation_alias="MODEL_TIMEOUT_SECONDS")
    retry_max_attempts: int = Field(default=4, ge=1, validation_alias="MODEL_RETRY_MAX_ATTEMPTS")
    retry_initial_delay: float = Field(default=0.5, ge=0, validation_alias="MODEL_RETRY_INITIAL_DELAY")
    retry_max_delay: float = Field(default=20.0, ge=0, validation_alias="MODEL_RETRY_MAX_DELAY")
    retry_max_retry_after: float = Field(default=60.0, ge=0, validation_alias="MODEL_RETRY_MAX_RETRY_AFTER")
    model_prices: str | None = Field(default=None, validation_alias="MODEL_PRICES")

    @field_validator("model_prices")
    @classmethod
    def _prices_parse(cls, value: str | None) -> str | None:
        ModelPrices.parse(value)  # a malformed price table fails when the settings load, not mid-run
        return value

    def prices(self) -> ModelPrices:
        return ModelPrices.parse(self.model_prices)

    @property
    def resolved_provider(self) -> Provider:
        if self.provider != "auto":
            return self.provider
        if self.azure_endpoint:
            return "azure_openai"
        if self.openai_base_url:
            return "compatible"
        if self.openai_api_key is not None:
            return "openai"
        return "scripted"

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.retry_max_attempts,
            initial_delay=self.retry_initial_delay,
            max_delay=self.retry_max_delay,
            max_retry_after=self.retry_max_retry_after,
        )


def build_model_client(
    settings: ModelSettings | None = None, *, scripted_base_url: str | None = None
) -> OpenAIChatClient:
    """The model client the settings describe. For `scripted`, `scripted_base_url` (a server the caller started,
    e.g. `ScriptedModelServer(DemoBrain()).start().base_url`) wins over `SCRIPTED_MODEL_URL`."""
    from .models.openai_client import OpenAIChatClient

    settings = settings or ModelSettings()
    provider = settings.resolved_provider
    timeout = settings.timeout_seconds
    if provider == "azure_openai":
        if not settings.azure_endpoint:
            raise ModelConfigurationError("MODEL_PROVIDER=azure_openai needs AZURE_OPENAI_ENDPOINT")
        return OpenAIChatClient.azure(
            endpoint=settings.azure_endpoint,
            deployment=settings.azure_deployment or settings.model_name,
            api_version=settings.azure_api_version,
            api_key=_secret(settings.azure_api_key),
            timeout=timeout,
        )
    if provider == "openai":
        key = _secret(settings.openai_api_key)
        if not key:
            raise ModelConfigurationError("MODEL_PROVIDER=openai needs OPENAI_API_KEY")
        return OpenAIChatClient.openai(
            api_key=key,
            model=settings.model_name,
            base_url=settings.openai_base_url,
            organization=settings.openai_org_id,
            timeout=timeout,
        )
    if provider == "compatible":
        if not settings.openai_base_url:
            raise ModelConfigurationError("MODEL_PROVIDER=compatible needs OPENAI_BASE_URL")
        return OpenAIChatClient.compatible(
            base_url=settings.openai_base_url,
            model=settings.model_name,
            api_key=_secret(settings.openai_api_key),
            timeout=timeout,
        )
    base_url = scripted_base_url or settings.scripted_model_url
    if not base_url:
        raise ModelConfigurationError(
            "MODEL_PROVIDER=scripted needs a running scripted model server: set SCRIPTED_MODEL_URL or pass "
            "scripted_base_url (start one with scripted_model.ScriptedModelServer(DemoBrain()).start())"
        )
    client = OpenAIChatClient.compatible(base_url=base_url, model=SCRIPTED_MODEL_NAME, timeout=timeout)
    client.provider = "scripted"
    return client


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None
