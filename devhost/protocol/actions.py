"""Parse the SDK's `OrchestratorState` JSON (and the `$OutOfProcData$:` failure path) into typed actions."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

OUT_OF_PROC_LABEL = "\n\n$OutOfProcData$:"


class ActionType(IntEnum):
    """`OutOfProcOrchestrationShim.AsyncActionType`."""

    CallActivity = 0
    CallActivityWithRetry = 1
    CallSubOrchestrator = 2
    CallSubOrchestratorWithRetry = 3
    ContinueAsNew = 4
    CreateTimer = 5
    WaitForExternalEvent = 6
    CallEntity = 7
    CallHttp = 8
    SignalEntity = 9
    ScheduledSignalEntity = 10
    WhenAny = 11
    WhenAll = 12


def parse_to_jtoken(text: str | None) -> Any:
    """The extension's `ParseToJToken`: JSON if it parses, else the raw string; None stays None."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def compact_json(value: Any) -> str:
    """Newtonsoft `Formatting.None`: no whitespace, non-ASCII kept as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class RetryOptions:
    first_retry_ms: float
    max_attempts: int
    backoff: float = 1.0
    max_retry_ms: float | None = None  # DF default: 6 days
    retry_timeout_ms: float | None = None  # DF default: TimeSpan.MaxValue

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RetryOptions:
        return cls(
            first_retry_ms=float(data.get("firstRetryIntervalInMilliseconds") or 0),
            max_attempts=int(data.get("maxNumberOfAttempts") or 1),
            backoff=float(data.get("backoffCoefficient") or 1.0),
            max_retry_ms=_opt_float(data.get("maxRetryIntervalInMilliseconds")),
            retry_timeout_ms=_opt_float(data.get("retryTimeoutInMilliseconds")),
        )


def _opt_float(value: Any) -> float | None:
    return None if value in (None, 0) else float(value)


@dataclass(frozen=True)
class Action:
    """One action of the list. `input` is the action's `input` string (the SDK's `df_dumps(x)`), verbatim."""

    type: ActionType
    function_name: str | None = None
    input: str | None = None
    instance_id: str | None = None
    version: str | None = None
    retry: RetryOptions | None = None
    fire_at: str | None = None
    is_canceled: bool = False
    event_name: str | None = None
    operation: str | None = None
    http_request: dict[str, Any] | None = None
    children: tuple[Action, ...] = ()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Action:
        try:
            kind = ActionType(int(data["actionType"]))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"unknown action {data!r}") from exc
        raw_input = data.get("input")
        if raw_input is not None and not isinstance(raw_input, str):
            raw_input = compact_json(raw_input)
        retry = data.get("retryOptions")
        return cls(
            type=kind,
            function_name=data.get("functionName"),
            input=raw_input,
            instance_id=data.get("instanceId"),
            version=data.get("version"),
            retry=RetryOptions.from_json(retry) if retry else None,
            fire_at=data.get("fireAt"),
            is_canceled=bool(data.get("isCanceled", False)),
            event_name=data.get("externalEventName"),
            operation=data.get("operation"),
            http_request=data.get("httpRequest"),
            children=tuple(cls.from_json(c) for c in data.get("compoundActions") or ()),
        )


@dataclass
class OrchestratorOutput:
    """What one invocation of the orchestrator function produced."""

    is_done: bool = False
    schema_version: int | None = None  # None = V1 (one inner list per yield)
    action_groups: list[list[Action]] = field(default_factory=list)
    output_json: str | None = None
    error: str | None = None
    custom_status_json: str | None = None
    # True when the function raised without a parseable `$OutOfProcData$` state (failure in the first episode etc.)
    raw_failure: bool = False
    # The SDK's `actions` as JSON, kept so that the next episode's output can reuse what it repeats.
    raw_actions: list[list[dict[str, Any]]] = field(default_factory=list, repr=False, compare=False)

    @property
    def is_v1(self) -> bool:
        return self.schema_version is None

    @classmethod
    def from_state_json(cls, text: str, previous: OrchestratorOutput | None = None) -> OrchestratorOutput:
        """`previous`: the same execution's output of its last episode. The SDK sends every action scheduled since
        the execution started, every episode: an action whose JSON equals the one at its place in `previous` is
        `previous`'s parsed action (parsing is a pure function of that JSON), so an episode parses only what is new
        (a growing share of the episode's time as a run goes on)."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("orchestrator output is not a JSON object")
        output = data.get("output")
        custom = data.get("customStatus")
        raw_actions = data.get("actions") or []
        return cls(
            is_done=bool(data.get("isDone", False)),
            schema_version=data.get("schemaVersion"),
            action_groups=_parse_groups(raw_actions, previous),
            output_json=compact_json(output) if "output" in data else None,
            error=data.get("error"),
            custom_status_json=compact_json(custom) if custom is not None else None,
            raw_actions=raw_actions,
        )

    @classmethod
    def from_exception(cls, exc: BaseException) -> OrchestratorOutput:
        """The uncaught-exception path: split the message on `$OutOfProcData$:` as OutOfProcExceptionHelpers does."""
        return cls.from_failure_text(str(exc), f"{type(exc).__name__}: {exc}")

    @classmethod
    def from_failure_text(cls, message: str, raw_error: str | None = None) -> OrchestratorOutput:
        """The same from a failure's text (the worker's `"{Type}: {message}"`); `raw_error` when no state is in it."""
        head, sep, state_text = message.partition(OUT_OF_PROC_LABEL)
        if sep:
            try:
                parsed = cls.from_state_json(state_text)
            except ValueError:
                parsed = None
            if parsed is not None:
                if parsed.error is None:
                    parsed.error = head
                return parsed
        return cls(error=raw_error if raw_error is not None else message, raw_failure=True)


def _parse_groups(raw_groups: list[Any], previous: OrchestratorOutput | None) -> list[list[Action]]:
    # (JSON, parsed) of each of `previous`'s actions, by place (an output built without JSON has neither)
    before = [] if previous is None else [
        list(zip(raw, parsed, strict=True))
        for raw, parsed in zip(previous.raw_actions, previous.action_groups, strict=False)
    ]
    groups: list[list[Action]] = []
    for g, group in enumerate(raw_groups):
        known = before[g] if g < len(before) else []
        groups.append([
            known[a][1] if a < len(known) and known[a][0] == action else Action.from_json(action)
            for a, action in enumerate(group)
        ])
    return groups
