"""Parse the SDK's `OrchestratorState` JSON (and the `$OutOfProcData$:` failure path) into typed actions."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, NamedTuple

from devhost.protocol.jsontext import compact_json

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


class RetryOptions(NamedTuple):
    first_retry_ms: float
    max_attempts: int
    backoff: float = 1.0
    max_retry_ms: float | None = None  # DF default: 6 days
    retry_timeout_ms: float | None = None  # DF default: TimeSpan.MaxValue

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RetryOptions:
        return cls(
            float(data.get("firstRetryIntervalInMilliseconds") or 0),
            int(data.get("maxNumberOfAttempts") or 1),
            float(data.get("backoffCoefficient") or 1.0),
            _opt_float(data.get("maxRetryIntervalInMilliseconds")),
            _opt_float(data.get("retryTimeoutInMilliseconds")),
        )


def _opt_float(value: Any) -> float | None:
    return None if value in (None, 0) else float(value)


_ACTION_TYPES = {int(t): t for t in ActionType}
_new_tuple = tuple.__new__


class Action(NamedTuple):
    """One action of the list. `input` is the action's `input` string (the SDK's `df_dumps(x)`), verbatim.

    Immutable (a tuple: cheap to build, and an episode reuses the last one's actions)."""

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
            kind = _ACTION_TYPES[int(data["actionType"])]
        except (KeyError, ValueError) as exc:
            raise ValueError(f"unknown action {data!r}") from exc
        get = data.get
        raw_input = get("input")
        if raw_input is not None and not isinstance(raw_input, str):
            raw_input = compact_json(raw_input)
        retry = get("retryOptions")
        compound = get("compoundActions")
        return _new_tuple(cls, (  # (the NamedTuple's own __new__ does this, as a Python call with 12 arguments)
            kind,
            get("functionName"),
            raw_input,
            get("instanceId"),
            get("version"),
            RetryOptions.from_json(retry) if retry else None,
            get("fireAt"),
            bool(get("isCanceled", False)),
            get("externalEventName"),
            get("operation"),
            get("httpRequest"),
            tuple([cls.from_json(c) for c in compound]) if compound else (),
        ))


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
    # The text of each of the SDK's `actions`, kept so that the next episode's output can reuse what it repeats.
    action_texts: list[list[str]] = field(default_factory=list, repr=False, compare=False)

    @property
    def is_v1(self) -> bool:
        return self.schema_version is None

    @classmethod
    def from_state_json(cls, text: str, previous: OrchestratorOutput | None = None) -> OrchestratorOutput:
        """`previous`: the same execution's output of its last episode. The SDK sends every action scheduled since
        the execution started, every episode: an action whose JSON text equals the one at its place in `previous` is
        `previous`'s parsed action (a JSON value is self-delimiting and parsing is a pure function of its text), so
        an episode decodes and parses only what is new (a growing share of the episode's time as a run goes on)."""
        scanned = _scan_state(text, previous)
        if scanned is None:  # not the usual shape (or not JSON): the plain parse decides, and raises what it raises
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError("orchestrator output is not a JSON object")
            raw_actions = data.get("actions") or []
            groups, texts = [[Action.from_json(action) for action in group] for group in raw_actions], []
        else:
            data, groups, texts = scanned
        output = data.get("output")
        custom = data.get("customStatus")
        return cls(
            is_done=bool(data.get("isDone", False)),
            schema_version=data.get("schemaVersion"),
            action_groups=groups,
            output_json=compact_json(output) if "output" in data else None,
            error=data.get("error"),
            custom_status_json=compact_json(custom) if custom is not None else None,
            action_texts=texts,
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


_DECODER = json.JSONDecoder()  # json.loads' own settings
_scan_value = _DECODER.scan_once
_scan_string = json.decoder.scanstring
_WHITESPACE = re.compile(r"[ \t\n\r]*")  # json's own


def _skip(text: str, idx: int) -> int:
    """Past the whitespace at `idx` (the SDK writes one space after separators: checked without the regex)."""
    char = text[idx]
    if char == " ":
        idx += 1
        char = text[idx]
    if char in " \t\n\r":
        idx = _WHITESPACE.match(text, idx).end()  # type: ignore[union-attr]
    return idx


class _Unusual(Exception):
    """The state text is not an object with an `actions` list of lists: parsed whole instead."""


def _scan_state(
    text: str, previous: OrchestratorOutput | None
) -> tuple[dict[str, Any], list[list[Action]], list[list[str]]] | None:
    """The state object key by key with json's own scanner; `actions` action by action, reusing `previous`'s parsed
    action wherever the text at that place starts with that action's text. None when the text is not so shaped or
    not valid JSON (then `json.loads` decides: the same values or the same error)."""
    try:
        return _scan_object(text, previous)
    except (_Unusual, ValueError, StopIteration, IndexError):  # (ValueError: the scanner's JSONDecodeError)
        return None


def _open(text: str, idx: int, bracket: str, close: str) -> tuple[int, bool]:
    """Past an opening bracket: (where the first member starts, whether there is one)."""
    idx = _skip(text, idx)
    if text[idx] != bracket:
        raise _Unusual
    idx = _skip(text, idx + 1)
    return (idx + 1, False) if text[idx] == close else (idx, True)


def _after(text: str, idx: int, close: str) -> tuple[int, bool]:
    """Past a member: (where the next one starts, whether there is one)."""
    idx = _skip(text, idx)
    char = text[idx]
    if char == ",":
        return _skip(text, idx + 1), True
    if char != close:
        raise _Unusual
    return idx + 1, False


def _scan_object(text: str, previous: OrchestratorOutput | None
                 ) -> tuple[dict[str, Any], list[list[Action]], list[list[str]]]:
    data: dict[str, Any] = {}
    groups: list[list[Action]] | None = None
    texts: list[list[str]] = []
    idx, more = _open(text, 0, "{", "}")
    while more:
        if text[idx] != '"':
            raise _Unusual
        key, idx = _scan_string(text, idx + 1)
        idx = _skip(text, idx)
        if text[idx] != ":":
            raise _Unusual
        idx = _skip(text, idx + 1)
        if key == "actions":
            groups, texts, idx = _scan_groups(text, idx, previous)
            data[key] = groups
        else:
            data[key], idx = _scan_value(text, idx)
        idx, more = _after(text, idx, "}")
    if text[idx:].strip(" \t\n\r") or groups is None:
        raise _Unusual
    return data, groups, texts


def _scan_groups(text: str, idx: int, previous: OrchestratorOutput | None
                 ) -> tuple[list[list[Action]], list[list[str]], int]:
    known_groups = previous.action_groups if previous is not None else []
    known_texts = previous.action_texts if previous is not None else []
    groups: list[list[Action]] = []
    texts: list[list[str]] = []
    idx, more = _open(text, idx, "[", "]")
    while more:
        g = len(groups)
        known = (known_groups[g], known_texts[g]) if g < len(known_groups) and g < len(known_texts) else ([], [])
        group, group_texts, idx = _scan_actions(text, idx, known)
        groups.append(group)
        texts.append(group_texts)
        idx, more = _after(text, idx, "]")
    return groups, texts, idx


def _scan_actions(text: str, idx: int, known: tuple[list[Action], list[str]]
                  ) -> tuple[list[Action], list[str], int]:
    known_actions, known_texts = known
    reusable = min(len(known_actions), len(known_texts))
    actions: list[Action] = []
    texts: list[str] = []
    idx, more = _open(text, idx, "[", "]")
    while more:
        a = len(actions)
        if a < reusable and text.startswith(known_texts[a], idx):
            actions.append(known_actions[a])
            texts.append(known_texts[a])
            idx += len(known_texts[a])
        else:
            value, end = _scan_value(text, idx)
            actions.append(Action.from_json(value))
            texts.append(text[idx:end])
            idx = end
        idx, more = _after(text, idx, "]")
    return actions, texts, idx
