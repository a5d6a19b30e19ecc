"""The parts of `host.json` devhost honours, read once at startup (docs/devhost.md lists each one).

Defaults are the ones the Functions host and the Durable extension apply when a key is absent, so an app without a
setting behaves here as it does on Azure (on a non-Consumption plan, which is what `func start` emulates).
"""

from __future__ import annotations

import json
import os
import re
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

DEFAULT_ROUTE_PREFIX = "api"
# Core Tools' local default; in Azure the task hub defaults to the site name.
DEFAULT_HUB_NAME = "TestHubName"
# ScriptJobHostOptionsSetup: 30 min unless the app runs on the (legacy) Consumption plan; 1 s is the minimum.
DEFAULT_FUNCTION_TIMEOUT = timedelta(minutes=30)
MIN_FUNCTION_TIMEOUT = timedelta(seconds=1)
# AzureStorageDurabilityProviderFactory: the defaults for absent maxConcurrent* settings are 10 x processor count.
CONCURRENCY_PER_PROCESSOR = 10


class HostConfigError(ValueError):
    """host.json exists but cannot be used."""


class StorageProvider(StrEnum):
    """`extensions.durableTask.storageProvider.type` (case-insensitive in the extension)."""

    AZURE_STORAGE = "AzureStorage"
    AZURE_MANAGED = "azureManaged"  # the Durable Task Scheduler
    MSSQL = "mssql"
    NETHERITE = "Netherite"

    @classmethod
    def parse(cls, raw: str, source: str) -> StorageProvider:
        for member in cls:
            if member.value.lower() == raw.strip().lower():
                return member
        known = ", ".join(m.value for m in cls)
        raise HostConfigError(f"{source}: extensions.durableTask.storageProvider.type {raw!r} is not one of {known}")


class RetryStrategy(StrEnum):
    FIXED_DELAY = "fixedDelay"
    EXPONENTIAL_BACKOFF = "exponentialBackoff"


class RetryPolicy(BaseModel):
    """host.json `retry` (the host validates it at startup). The Functions runtime applies it only to Timer, Kafka,
    Event Hubs and Cosmos DB triggers; HTTP, activity, orchestration and entity invocations are never retried by it
    (Durable retries are the orchestrator's `call_*_with_retry`). devhost serves none of those triggers, so it
    validates the policy, reports it and applies it to nothing, exactly as the host does for the triggers it serves."""

    model_config = ConfigDict(frozen=True)

    strategy: RetryStrategy
    max_retry_count: int
    delay_interval: timedelta | None = None
    minimum_interval: timedelta | None = None
    maximum_interval: timedelta | None = None

    @classmethod
    def from_section(cls, section: dict[str, Any], source: str) -> RetryPolicy:
        raw_strategy = _value(section, "strategy", None)
        strategy = next((s for s in RetryStrategy if isinstance(raw_strategy, str)
                         and s.value.lower() == raw_strategy.lower()), None)
        if strategy is None:
            raise HostConfigError(f"{source}: retry.strategy must be fixedDelay or exponentialBackoff")
        count = _value(section, "maxRetryCount", None)
        if isinstance(count, bool) or not isinstance(count, int) or count < -1:
            raise HostConfigError(f"{source}: retry.maxRetryCount must be an integer (-1: retry forever)")
        intervals = {key: _interval(section, key, source) for key in ("delayInterval", "minimumInterval",
                                                                      "maximumInterval")}
        needed = ("delayInterval",) if strategy == RetryStrategy.FIXED_DELAY else ("minimumInterval",
                                                                                      "maximumInterval")
        for key in needed:
            if intervals[key] is None:
                raise HostConfigError(f"{source}: retry.{key} is required for the {strategy.value} strategy")
        return cls(strategy=strategy, max_retry_count=count, delay_interval=intervals["delayInterval"],
                   minimum_interval=intervals["minimumInterval"], maximum_interval=intervals["maximumInterval"])


def _interval(section: dict[str, Any], key: str, source: str) -> timedelta | None:
    raw = _value(section, key, None)
    if raw is None:
        return None
    try:
        return parse_timespan(str(raw))
    except ValueError as exc:
        raise HostConfigError(f"{source}: retry.{key}: {exc}") from exc


class HostConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    route_prefix: str = DEFAULT_ROUTE_PREFIX
    hub_name: str = DEFAULT_HUB_NAME
    # None: no limit ("-1"); every activity, HTTP function, entity batch and orchestrator episode is bounded by it.
    function_timeout: timedelta | None = DEFAULT_FUNCTION_TIMEOUT
    max_concurrent_activities: int | None = None  # None: the extension's default (10 x processors)
    max_concurrent_orchestrators: int | None = None
    max_concurrent_entities: int | None = None
    storage_provider: StorageProvider = StorageProvider.AZURE_STORAGE
    retry: RetryPolicy | None = None

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
        prefix = _value(http, "routePrefix", DEFAULT_ROUTE_PREFIX)
        if not isinstance(prefix, str):
            raise HostConfigError(f"{source}: extensions.http.routePrefix must be a string")
        hub = resolve_app_setting(str(_value(durable, "hubName", None) or DEFAULT_HUB_NAME),
                                  "extensions.durableTask.hubName", source)
        provider = _section(durable, "storageProvider", source)
        provider_type = _value(provider, "type", StorageProvider.AZURE_STORAGE.value)
        if not isinstance(provider_type, str):
            raise HostConfigError(f"{source}: extensions.durableTask.storageProvider.type must be a string")
        return cls(
            route_prefix=prefix.strip("/"),
            hub_name=hub,
            function_timeout=_function_timeout(_value(document, "functionTimeout", None), source),
            max_concurrent_activities=_positive(durable, "maxConcurrentActivityFunctions", source),
            max_concurrent_orchestrators=_positive(durable, "maxConcurrentOrchestratorFunctions", source),
            max_concurrent_entities=_positive(durable, "maxConcurrentEntityFunctions", source),
            storage_provider=StorageProvider.parse(provider_type, source),
            retry=RetryPolicy.from_section(retry, source) if (retry := _section(document, "retry", source)) else None,
        )

    @staticmethod
    def default_concurrency() -> int:
        return CONCURRENCY_PER_PROCESSOR * (os.cpu_count() or 1)


def parse_timespan(text: str) -> timedelta:
    """.NET `TimeSpan.Parse` for the forms host.json uses: `d`, `[-][d.]hh:mm[:ss[.fffffff]]`."""
    value = text.strip()
    if re.fullmatch(r"-?\d+", value):
        return timedelta(days=int(value))
    match = re.fullmatch(r"(-)?(?:(\d+)[.:](?=\d+:\d+:))?(\d+):(\d+)(?::(\d+)(?:\.(\d{1,7}))?)?", value)
    if match is None:
        raise ValueError(f"{text!r} is not a TimeSpan ([d.]hh:mm:ss)")
    sign, days, hours, minutes, seconds, fraction = match.groups()
    if int(hours) > 23 or int(minutes) > 59 or int(seconds or 0) > 59:
        raise ValueError(f"{text!r} is not a TimeSpan (a component is out of range)")
    delta = timedelta(days=int(days or 0), hours=int(hours), minutes=int(minutes), seconds=int(seconds or 0),
                      microseconds=int((fraction or "0").ljust(7, "0")) // 10)
    return -delta if sign else delta


def _function_timeout(raw: Any, source: str) -> timedelta | None:
    if raw is None:
        return DEFAULT_FUNCTION_TIMEOUT
    try:
        timeout = parse_timespan(str(raw))
    except ValueError as exc:
        raise HostConfigError(f"{source}: functionTimeout: {exc}") from exc
    if timeout == timedelta(days=-1):
        return None  # "-1": unbounded (every plan but Consumption)
    if timeout < MIN_FUNCTION_TIMEOUT:
        raise HostConfigError(f"{source}: FunctionTimeout must be greater than 00:00:01 (got {raw!r})")
    return timeout


def _positive(section: dict[str, Any], key: str, source: str) -> int | None:
    raw = _value(section, key, None)
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
        raise HostConfigError(f"{source}: {key[0].upper() + key[1:]} must be a positive integer value.")
    return raw


def unset_hub_setting(app_dir: str | Path) -> str | None:
    """The app setting host.json's `hubName` names (`"%TASKHUB_NAME%"`) when it is not set, else None."""
    path = Path(app_dir) / "host.json"
    try:
        document = json.loads(path.read_text(encoding="utf-8-sig")) if path.exists() else {}
    except (OSError, json.JSONDecodeError):
        return None  # HostConfig.load reports it
    extensions = document.get("extensions") if isinstance(document, dict) else None
    durable = extensions.get("durableTask") if isinstance(extensions, dict) else None
    hub = durable.get("hubName") if isinstance(durable, dict) else None
    match = re.fullmatch(r"%([^%]+)%", hub.strip()) if isinstance(hub, str) else None
    return match.group(1) if match and not os.environ.get(match.group(1), "").strip() else None


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


def _value(section: dict[str, Any], name: str, default: Any) -> Any:
    # host.json keys are case-insensitive in the Functions host.
    for key, value in section.items():
        if key.lower() == name.lower():
            return value
    return default


def _section(parent: dict[str, Any], name: str, source: str) -> dict[str, Any]:
    value = _value(parent, name, {})
    if not isinstance(value, dict):
        raise HostConfigError(f"{source}: '{name}' must be a JSON object")
    return value
