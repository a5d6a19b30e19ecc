"""App settings of the streams.

| variable | meaning | default |
|---|---|---|
| `STREAM_PING_SECONDS` | an idle stream sends a `: ping` comment this often (keeps proxies from closing it) | `15` |
| `STREAM_WATCH_MIN_INTERVAL_SECONDS` | a run's watcher checks the orchestration at least this far apart | `0.05` |
| `STREAM_WATCH_MAX_INTERVAL_SECONDS` | ... and backs off up to this while nothing changes | `1.0` |
| `STREAM_MAX_SECONDS` | end a stream (without `done`) after this long, below the function timeout (`0`: none) | `240` |

A stream that ends without `done` is resumed by reconnecting with the last event id (`EventSource` does it itself).
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

MAX_SECONDS = 240.0  # below every plan's default function timeout (Consumption: 5 min), with a margin


class StreamSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, env_ignore_empty=True)

    ping_seconds: float = Field(default=15.0, gt=0, validation_alias="STREAM_PING_SECONDS")
    watch_min_interval_seconds: float = Field(default=0.05, gt=0, validation_alias="STREAM_WATCH_MIN_INTERVAL_SECONDS")
    watch_max_interval_seconds: float = Field(default=1.0, gt=0, validation_alias="STREAM_WATCH_MAX_INTERVAL_SECONDS")
    # A stream is one HTTP invocation: the host cuts it at `functionTimeout` (host.json: 10 min; the Consumption plan's
    # default: 5 min), mid-event perhaps. Ended by the app first, it ends between events and the client resumes.
    max_seconds: float = Field(default=MAX_SECONDS, ge=0, validation_alias="STREAM_MAX_SECONDS")
