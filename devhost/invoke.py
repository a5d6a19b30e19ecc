"""Call orchestrator, activity and entity functions through the real `azure.functions` converters.

What the Python worker does around a Durable trigger (durable-protocol.md §1.5, E.2): decode the trigger datum with
the binding's converter, call the user function (as registered by the DF decorators), encode the return value with
the same converter; failures become the texts the extension derives from the worker's `"{Type}: {msg}"`.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import traceback
from dataclasses import dataclass
from typing import Any

from azure.functions import meta
from azure.functions.durable_functions import (
    ActivityTriggerConverter,
    EnitityTriggerConverter,
    OrchestrationTriggerConverter,
)

from devhost.app_loader import FunctionInfo
from devhost.protocol.actions import OrchestratorOutput, compact_json
from devhost.protocol.entity_messages import BatchResult, EntityInternalError, parse_batch_result


def install_sdk_timestamp_cache(max_entries: int = 1 << 16) -> None:
    """Memoise the SDK's per-event `dateutil` timestamp parse (a pure function).

    The SDK re-parses every history timestamp on every episode, which dominates episode cost for long histories;
    past events repeat verbatim, so a bounded cache returns the very same (immutable) datetimes dateutil would.
    """
    history_event_module = importlib.import_module("azure.durable_functions.models.history.HistoryEvent")

    parse = history_event_module.dt_parse
    if getattr(parse, "_devhost_cached", False):
        return
    cached = functools.lru_cache(maxsize=max_entries)(parse)
    cached._devhost_cached = True  # type: ignore[attr-defined]
    history_event_module.dt_parse = cached  # type: ignore[assignment]


def invoke_orchestrator(function: FunctionInfo, trigger_json: str) -> OrchestratorOutput:
    """One episode of the orchestrator function. Never raises for user errors (they are in the output)."""
    context = OrchestrationTriggerConverter.decode(meta.Datum(trigger_json, "string"), trigger_metadata=None)
    try:
        returned = function.fn(**{function.trigger_param: context})
    except (Exception, SystemExit) as exc:  # the SDK raises with "$OutOfProcData$:"; sys.exit() must not stop us
        return OrchestratorOutput.from_exception(exc)
    datum = OrchestrationTriggerConverter.encode(returned, expected_type=None)
    try:
        return OrchestratorOutput.from_state_json(datum.value)
    except (ValueError, TypeError) as exc:
        return OrchestratorOutput(error=f"Out of proc orchestrators must return a valid JSON schema: {exc}",
                                  raw_failure=True)


@dataclass(frozen=True)
class ActivityOutcome:
    ok: bool
    result_json: str | None = None  # TaskCompleted.Result
    reason: str | None = None  # TaskFailed.Reason
    details: str | None = None  # TaskFailed.Details


def activity_input_datum(input_text: str | None) -> meta.Datum:
    """DF unwraps `TaskScheduled.Input`'s one-element array; a string token goes as `string`, other JSON as `json`."""
    if input_text is None:
        return meta.Datum("null", "json")
    return meta.Datum(input_text, "string")


async def invoke_activity_async(function: FunctionInfo, input_text: str | None) -> ActivityOutcome:
    """Async activities run on the calling loop."""
    try:
        argument = ActivityTriggerConverter.decode(activity_input_datum(input_text), trigger_metadata=None)
        returned = function.fn(**{function.trigger_param: argument})
        if inspect.isawaitable(returned):
            returned = await returned
        return _activity_success(returned)
    except (Exception, SystemExit) as exc:  # user code never stops the host
        return activity_failure(function.name, exc)


def invoke_activity_sync(function: FunctionInfo, input_text: str | None) -> ActivityOutcome:
    """Sync activities run on a worker thread."""
    try:
        argument = ActivityTriggerConverter.decode(activity_input_datum(input_text), trigger_metadata=None)
        return _activity_success(function.fn(**{function.trigger_param: argument}))
    except (Exception, SystemExit) as exc:  # user code never stops the host
        return activity_failure(function.name, exc)


def _activity_success(returned: Any) -> ActivityOutcome:
    datum = ActivityTriggerConverter.encode(returned, expected_type=None)
    # The host parses the worker's JSON and re-serialises it compactly (Newtonsoft Formatting.None).
    return ActivityOutcome(ok=True, result_json=compact_json(json.loads(datum.value)))


def activity_failure(name: str, exc: BaseException) -> ActivityOutcome:
    """`Reason = "Activity function 'X' failed:  Type: msg"` (two spaces) and a .NET-shaped exception as Details."""
    friendly = f" {type(exc).__name__}: {exc}"
    stack = "".join(traceback.format_tb(exc.__traceback__))
    details = {
        "$type": "System.Exception, System.Private.CoreLib",
        "ClassName": "System.Exception",
        "Message": friendly,
        "Data": None,
        "InnerException": {
            "$type": "Microsoft.Azure.WebJobs.Script.Workers.Rpc.RpcException, Microsoft.Azure.WebJobs.Script",
            "Message": f"Result: Failure\nException:{friendly}\nStack: {stack}",
        },
        "HelpURL": None,
        "StackTraceString": None,
        "RemoteStackTraceString": None,
        "RemoteStackIndex": 0,
        "ExceptionMethod": None,
        "HResult": -2146233088,
        "Source": None,
        "WatsonBuckets": None,
    }
    return ActivityOutcome(ok=False, reason=f"Activity function '{name}' failed: {friendly}",
                           details=json.dumps(details))


def invoke_entity_batch(function: FunctionInfo, batch_json: str, batch_size: int) -> BatchResult:
    """One entity batch = one function call. Raises EntityInternalError where the extension aborts the batch."""
    context = EnitityTriggerConverter.decode(meta.Datum(batch_json, "string"), trigger_metadata=None)
    try:
        returned = function.fn(**{function.trigger_param: context})
    except (Exception, SystemExit) as exc:  # user code never stops the host
        raise EntityInternalError(f"entity function '{function.name}' failed: {type(exc).__name__}: {exc}") from exc
    datum = EnitityTriggerConverter.encode(returned, expected_type=None)
    return parse_batch_result(datum.value, batch_size)
