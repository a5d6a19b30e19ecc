"""Telemetry settings: the standard OpenTelemetry variables the app acts on itself (what each means: the docstring
of `telemetry.setup`). The OpenTelemetry SDK and the Azure Monitor distro read the rest of theirs themselves
(`OTEL_SERVICE_NAME`, `OTEL_BSP_*`, the OTLP headers...)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


class TelemetrySettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, env_ignore_empty=True)

    applicationinsights_connection_string: SecretStr | None = Field(
        default=None, validation_alias="APPLICATIONINSIGHTS_CONNECTION_STRING"
    )
    traces_exporter: str | None = Field(default=None, validation_alias="OTEL_TRACES_EXPORTER")
    metrics_exporter: str | None = Field(default=None, validation_alias="OTEL_METRICS_EXPORTER")
    otlp_endpoint: str | None = Field(default=None, validation_alias="OTEL_EXPORTER_OTLP_ENDPOINT")
    otlp_traces_endpoint: str | None = Field(default=None, validation_alias="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    otlp_metrics_endpoint: str | None = Field(default=None, validation_alias="OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
    capture_message_content: bool = Field(default=False, validation_alias=CAPTURE_CONTENT)

    @field_validator("capture_message_content", mode="before")
    @classmethod
    def _only_true_captures(cls, value: Any) -> bool:
        # Message contents are sensitive: only the exact word `true` (any case) turns the capture on, as the GenAI
        # instrumentations read it; anything else leaves it off rather than failing the app.
        return str(value).strip().lower() == "true"
