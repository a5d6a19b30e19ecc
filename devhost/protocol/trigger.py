"""The orchestration-trigger JSON (`OrchestrationContextToString`), built from cached per-event JSON texts.

Past events are kept as their serialised text, so an episode only serialises its new events: the history array is
a string join, not a re-serialisation of the whole history.
"""

from __future__ import annotations

import json

# Schema fields the extension sends with Azure Storage (durable-protocol.md §1.1).
_SCHEMA_TAIL = (
    '"upperSchemaVersion":1,"upperSchemaVersionNew":2,'
    '"longRunningTimerIntervalDuration":"3.00:00:00","maximumShortTimerDuration":"6.00:00:00",'
    '"defaultHttpAsyncRequestSleepTimeMillseconds":30000'
)


def input_token_json(input_json: str | None) -> str:
    """`ExecutionStarted.Input` as the JToken the extension puts in `"input"` (raw text if it is not JSON)."""
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
) -> str:
    return (
        '{"history":[' + ",".join(history_texts) + "],"
        f'"input":{input_token_json(input_json)},'
        f'"instanceId":{json.dumps(instance_id)},'
        f'"isReplaying":{"true" if is_replaying else "false"},'
        f'"parentInstanceId":{json.dumps(parent_instance_id)},'
        + _SCHEMA_TAIL
        + "}"
    )
