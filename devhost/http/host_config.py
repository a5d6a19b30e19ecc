"""The parts of `host.json` the HTTP side of the host honours."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

DEFAULT_ROUTE_PREFIX = "api"
# Core Tools' local default; in Azure the task hub defaults to the site name.
DEFAULT_HUB_NAME = "TestHubName"


class HostConfigError(ValueError):
    """host.json exists but cannot be used."""


class HostConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    route_prefix: str = DEFAULT_ROUTE_PREFIX
    hub_name: str = DEFAULT_HUB_NAME
    # durableTask.notifications-independent switch of HttpApiHandler: Failed -> 500 on status queries.
    return_internal_server_error_on_failure: bool = False

    @classmethod
    def load(cls, app_dir: str | Path) -> HostConfig:
        path = Path(app_dir) / "host.json"
        if not path.exists():
            return cls()
        try:
            document: Any = json.loads(path.read_text(encoding="utf-8-sig"))
        except (OSError, json.JSONDecodeError) as exc:
            raise HostConfigError(f"{path}: cannot read host.json: {exc}") from exc
        return cls.from_document(document, source=str(path))

    @classmethod
    def from_document(cls, document: Any, *, source: str = "host.json") -> HostConfig:
        if not isinstance(document, dict):
            raise HostConfigError(f"{source}: the top level must be a JSON object")
        extensions = _section(document, "extensions", source)
        http = _section(extensions, "http", source)
        durable = _section(extensions, "durableTask", source)
        prefix = http.get("routePrefix", DEFAULT_ROUTE_PREFIX)
        if not isinstance(prefix, str):
            raise HostConfigError(f"{source}: extensions.http.routePrefix must be a string")
        hub = resolve_app_setting(str(durable.get("hubName") or DEFAULT_HUB_NAME), "extensions.durableTask.hubName",
                                  source)
        return cls(route_prefix=prefix.strip("/"), hub_name=hub)


def resolve_app_setting(value: str, key: str, source: str = "host.json") -> str:
    """`%NAME%` (as the whole value) -> the app setting NAME, as the Durable extension resolves `hubName` with the
    host's name resolver. Unresolved, the host keeps the literal, which no task hub name accepts, and does not start:
    here the error says which setting is missing."""
    match = re.fullmatch(r"%([^%]+)%", value.strip())
    if match is None:
        return value
    name = match.group(1)
    resolved = os.environ.get(name, "").strip()
    if not resolved:
        raise HostConfigError(
            f"{source}: {key} is {value!r} but the app setting {name} is not set "
            "(set it in local.settings.json Values or in the environment)"
        )
    return resolved


def _section(parent: dict[str, Any], name: str, source: str) -> dict[str, Any]:
    # host.json keys are case-insensitive in the Functions host.
    for key, value in parent.items():
        if key.lower() == name.lower():
            if not isinstance(value, dict):
                raise HostConfigError(f"{source}: '{name}' must be a JSON object")
            return value
    return {}
