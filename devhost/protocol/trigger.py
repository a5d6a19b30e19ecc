"""The orchestration-trigger JSON (`OrchestrationContextToString`), built from cached per-event JSON texts.

Past events are kept as their serialised text, so an episode only serialises its new events: the history array is
a string join, not a re-serialisation of the whole history.
"""

from __future__ import annotations

import functools
import json
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]

# The schema fields the extension sends (durable-protocol.md §1.1). The long-timer pair is the durability provider's
# `LongRunningTimerIntervalLength` / `MaximumDelayTime`: Azure Storage sets 3 and 6 days; the base provider (which the
# Durable Task Scheduler `azureManaged` and MSSQL providers keep) leaves TimeSpan.Zero, serialised "00:00:00", which
# the SDK parses to a zero timedelta and so never chunks a long timer.
_LONG_TIMER_FIELDS = {
    "azurestorage": ("3.00:00:00", "6.00:00:00"),
}
_NO_LONG_TIMERS = ("00:00:00", "00:00:00")


@functools.lru_cache(maxsize=8)
def _schema_tail(storage_provider: str) -> str:
    interval, maximum = _LONG_TIMER_FIELDS.get(storage_provider.lower(), _NO_LONG_TIMERS)
    return (
        '"upperSchemaVersion":1,"upperSchemaVersionNew":2,'
        f'"longRunningTimerIntervalDuration":"{interval}","maximumShortTimerDuration":"{maximum}",'
        '"defaultHttpAsyncRequestSleepTimeMillseconds":30000'
    )


@functools.lru_cache(maxsize=256)
def input_token_json(input_json: str | None) -> str:
    """`ExecutionStarted.Input` as the JToken the extension puts in `"input"` (raw text if it is not JSON).

    Cached by the exact text (a pure function of it): every episode of an execution sends the same input."""
    if input_json is None:
        return "null"
    try:
        json.loads(input_json)
    except ValueError:
        return json.dumps(input_json, ensure_ascii=False)
    return input_json


def orchestration_trigger_json(
    history_texts: list[str],
    *,
    input_json: str | None,
    instance_id: str,
    is_replaying: bool,
    parent_instance_id: str | None,
    storage_provider: str = "AzureStorage",
) -> str:
    return (
        '{"history":[' + ",".join(history_texts) + "],"
        f'"input":{input_token_json(input_json)},'
        f'"instanceId":{encode_basestring_ascii(instance_id)},'  # (json.dumps of a str)
        f'"isReplaying":{"true" if is_replaying else "false"},'
        f'"parentInstanceId":{"null" if parent_instance_id is None else encode_basestring_ascii(parent_instance_id)},'
        + _schema_tail(storage_provider)
        + "}"
    )
