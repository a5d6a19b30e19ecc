"""App settings of the streams.

| variable | meaning | default |
|---|---|---|
| `STREAM_PING_SECONDS` | an idle stream sends a `: ping` comment this often (keeps proxies from closing it) | `15` |
| `STREAM_WATCH_MIN_INTERVAL_SECONDS` | a run's watcher checks the orchestration at least this far apart | `0.05` |
| `STREAM_WATCH_MAX_INTERVAL_SECONDS` | ... and backs off up to this while nothing changes | `1.0` |
| `STREAM_MAX_SECONDS` | end a stream (without `done`) after this long: keep it below the function timeout | `0`: none |

A stream that ends without `done` is resumed by reconnecting with the last event id (`EventSource` does it itself).
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class StreamSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, env_ignore_empty=True)

    ping_seconds: float = Field(default=15.0, gt=0, validation_alias="STREAM_PING_SECONDS")
    watch_min_interval_seconds: float = Field(default=0.05, gt=0, validation_alias="STREAM_WATCH_MIN_INTERVAL_SECONDS")
    watch_max_interval_seconds: float = Field(default=1.0, gt=0, validation_alias="STREAM_WATCH_MAX_INTERVAL_SECONDS")
    max_seconds: float = Field(default=0, ge=0, validation_alias="STREAM_MAX_SECONDS")
