"""Store settings, read from the environment (Functions app settings / local.settings.json ``Values``)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class StoreSettings(BaseSettings):
    """Which store to open and how.

    ``COSMOS_ENDPOINT`` set -> Cosmos DB (``COSMOS_KEY``, or ``DefaultAzureCredential`` when no key is given);
    otherwise the embedded SQLite store at ``SESSION_STORE_PATH``. ``SESSION_STORE`` (``cosmos`` / ``sqlite``) picks
    one on purpose (on Azure the SQLite store needs ``SESSION_STORE=sqlite``: see ``agent_runs.deployment``).
    """

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, env_ignore_empty=True)

    session_store: Literal["auto", "cosmos", "sqlite"] = Field(
        default="auto", validation_alias="SESSION_STORE",
        description="auto: Cosmos DB when COSMOS_ENDPOINT is set, else SQLite; cosmos/sqlite: that one, on purpose",
    )
    cosmos_endpoint: str | None = Field(default=None, validation_alias="COSMOS_ENDPOINT")
    cosmos_key: SecretStr | None = Field(default=None, validation_alias="COSMOS_KEY")
    cosmos_database: str = Field(default="agents", validation_alias="COSMOS_DATABASE")
    cosmos_container_prefix: str = Field(
        default="", validation_alias="COSMOS_CONTAINER_PREFIX", pattern=r"^[A-Za-z0-9_-]*$",
        description="prepended to every container name, so several apps can share one database",
    )
    session_ttl_seconds: int | None = Field(
        default=None, gt=0, validation_alias="SESSION_TTL_SECONDS",
        description="retention: every item expires this long after its last write; unset keeps items forever",
    )
    session_store_path: str = Field(default="./.devhost/sessions.sqlite3", validation_alias="SESSION_STORE_PATH")
    session_store_inline: bool = Field(
        default=True, validation_alias="SESSION_STORE_INLINE",
        description="SQLite: run point operations on the caller's thread when they need not wait for a lock; false "
        "sends every operation to the store's thread (e.g. a file system where even an uncontended write may stall)",
    )
    worker_process_count: int = Field(
        default=1, ge=0, validation_alias="FUNCTIONS_WORKER_PROCESS_COUNT",
        description="how many processes run the app's functions (Azure and devhost set it); they share the store",
    )

    @model_validator(mode="after")
    def _cosmos_needs_an_endpoint(self) -> Self:
        if self.session_store == "cosmos" and not self.cosmos_endpoint:
            raise ValueError("SESSION_STORE=cosmos needs COSMOS_ENDPOINT (the Cosmos DB account URL)")
        return self

    @model_validator(mode="after")
    def _shared_by_every_worker(self) -> Self:
        if not self.uses_cosmos and self.session_store_path == ":memory:" and self.worker_process_count > 1:
            raise ValueError(
                f"SESSION_STORE_PATH=':memory:' cannot be shared by {self.worker_process_count} worker processes "
                "(FUNCTIONS_WORKER_PROCESS_COUNT): each would see its own empty store; use a file path or Cosmos DB"
            )
        return self

    @property
    def uses_cosmos(self) -> bool:
        if self.session_store == "auto":
            return bool(self.cosmos_endpoint)
        return self.session_store == "cosmos"
