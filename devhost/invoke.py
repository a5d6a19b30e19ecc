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
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
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

# The timestamps devhost writes into histories (`timefmt.dotnet_iso`, the extension's Newtonsoft round-trip form).
_DOTNET_UTC = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,7}))?Z")


def fast_dateutil_parse(parse: Callable[..., datetime]) -> Callable[..., datetime]:
    """`parse` (dateutil's) with a fast path for `yyyy-MM-ddTHH:mm:ss[.fffffff]Z`, returning what dateutil returns for
    it: the same fields, the fraction truncated to microseconds, and dateutil's own tzinfo for `Z` (taken from dateutil
    itself: `tzlocal()` where the machine's zone is UTC, else `tzutc()`). Anything else (and any value dateutil would
    refuse) goes to `parse` itself."""
    utc = parse("2000-01-01T00:00:00Z").tzinfo

    def parsed(text: Any, *args: Any, **kwargs: Any) -> datetime:
        found = _DOTNET_UTC.fullmatch(text) if isinstance(text, str) and not (args or kwargs) else None
        if found is None:
            return parse(text, *args, **kwargs)
        year, month, day, hour, minute, second, fraction = found.groups()
        try:
            return datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                            int((fraction or "0")[:6].ljust(6, "0")), tzinfo=utc)
        except ValueError:
            return parse(text)

    return parsed


def install_sdk_timestamp_cache(max_entries: int = 1 << 16) -> None:
    """Memoise the SDK's per-event `dateutil` timestamp parse (a pure function), with a fast path for devhost's own
    timestamp format (`fast_dateutil_parse`: the same datetimes, ~50x cheaper than dateutil's general parser).

    The SDK re-parses every history timestamp on every episode, which dominates episode cost for long histories;
    past events repeat verbatim, so a bounded cache returns the very same (immutable) datetimes dateutil would; each
    new event's timestamp still cost a dateutil parse (~0.15 ms, a third of a short episode) before the fast path.
    """
    _memoise_sdk_function("azure.durable_functions.models.history.HistoryEvent", "dt_parse", max_entries,
                          fast_dateutil_parse)


def install_sdk_timespan_cache(max_entries: int = 64) -> None:
    """Memoise the SDK's per-episode parse of the trigger's TimeSpan fields (`maximumShortTimerDuration`,
    `longRunningTimerIntervalDuration`): a pure function of the text, which is the same in every episode of a task
    hub (`trigger._LONG_TIMER_FIELDS`); the timedelta it returns is immutable. A text it refuses still raises."""
    _memoise_sdk_function("azure.durable_functions.models.DurableOrchestrationContext", "parse_timespan_attrib",
                          max_entries)


def _memoise_sdk_function(module_name: str, name: str, max_entries: int,
                          wrap: Callable[[Any], Any] | None = None) -> None:
    """Replace the SDK module's pure function `name` by a bounded memo of it (`wrap` applied first), once; a module
    without it is left alone."""
    module = importlib.import_module(module_name)
    function = getattr(module, name, None)
    if function is None or getattr(function, "_devhost_cached", False):
        return
    cached = functools.lru_cache(maxsize=max_entries)(wrap(function) if wrap else function)
    cached._devhost_cached = True  # type: ignore[attr-defined]
    setattr(module, name, cached)


def install_sdk_executor_class_cache() -> None:
    """Build the SDK's per-episode `namedtuple("SetTaskValuePayload", ...)` class once, not once per episode.

    `TaskOrchestrationExecutor.__init__` (run for every episode) defines that class anew: `namedtuple` compiles its
    source with `eval` and creates a type, ~30 us, more than the rest of a short episode's SDK set-up. The class is a
    pure function of its constant name and fields, and the SDK only builds its own constant lookup table of tuples
    with it, so one shared class gives the very same table; other calls go to `namedtuple` itself."""
    executor_module = importlib.import_module("azure.durable_functions.models.TaskOrchestrationExecutor")
    make = getattr(executor_module, "namedtuple", None)
    if make is None or getattr(make, "_devhost_cached", False):  # (an SDK that no longer calls it: nothing to do)
        return
    made: dict[tuple[str, tuple[str, ...]], type] = {}
    module = executor_module.__name__  # (the classes' __module__, as namedtuple would take it from its caller)

    def namedtuple_once(typename: str, field_names: Any, **kwargs: Any) -> type:
        if kwargs or not isinstance(field_names, tuple):
            return make(typename, field_names, **{"module": module, **kwargs})
        key = (typename, field_names)
        if key not in made:
            made[key] = make(typename, field_names, module=module)
        return made[key]

    namedtuple_once._devhost_cached = True  # type: ignore[attr-defined]
    executor_module.namedtuple = namedtuple_once  # type: ignore[attr-defined]


def install_sdk_caches() -> None:
    """The SDK-side caches above, where orchestrator episodes run (the engine's process and worker processes)."""
    install_sdk_timestamp_cache()
    install_sdk_timespan_cache()
    install_sdk_executor_class_cache()


def invoke_orchestrator(
    function: FunctionInfo, trigger_json: str, previous: OrchestratorOutput | None = None
) -> OrchestratorOutput:
    """One episode of the orchestrator function. Never raises for user errors (they are in the output).
    `previous`: the execution's output of its last episode (what it repeats is not parsed again)."""
    context = OrchestrationTriggerConverter.decode(meta.Datum(trigger_json, "string"), trigger_metadata=None)
    try:
        returned = function.fn(**{function.trigger_param: context})
    except (Exception, SystemExit) as exc:  # the SDK raises with "$OutOfProcData$:"; sys.exit() must not stop us
        return OrchestratorOutput.from_exception(exc)
    datum = OrchestrationTriggerConverter.encode(returned, expected_type=None)
    try:
        return OrchestratorOutput.from_state_json(datum.value, previous)
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


def _activity_kwargs(function: FunctionInfo, input_text: str | None, client_binding_json: str | None) -> dict[str, Any]:
    """The trigger's argument, and the `durableClient` binding's JSON when the activity declares one."""
    argument = ActivityTriggerConverter.decode(activity_input_datum(input_text), trigger_metadata=None)
    kwargs: dict[str, Any] = {function.trigger_param: argument}
    if function.durable_client_param is not None:
        kwargs[function.durable_client_param] = client_binding_json
    return kwargs


async def invoke_activity_async(
    function: FunctionInfo, input_text: str | None, client_binding_json: str | None = None
) -> ActivityOutcome:
    """Async activities run on the calling loop."""
    try:
        returned = function.fn(**_activity_kwargs(function, input_text, client_binding_json))
        if inspect.isawaitable(returned):
            returned = await returned
        return _activity_success(returned)
    except (Exception, SystemExit) as exc:  # user code never stops the host
        return activity_failure(function.name, exc)


def invoke_activity_sync(
    function: FunctionInfo, input_text: str | None, client_binding_json: str | None = None
) -> ActivityOutcome:
    """Sync activities run on a worker thread."""
    try:
        return _activity_success(function.fn(**_activity_kwargs(function, input_text, client_binding_json)))
    except (Exception, SystemExit) as exc:  # user code never stops the host
        return activity_failure(function.name, exc)


def _activity_success(returned: Any) -> ActivityOutcome:
    datum = ActivityTriggerConverter.encode(returned, expected_type=None)
    # The host parses the worker's JSON and re-serialises it compactly (Newtonsoft Formatting.None).
    return ActivityOutcome(ok=True, result_json=compact_json(json.loads(datum.value)))


def activity_failure(name: str, exc: BaseException) -> ActivityOutcome:
    """`Reason = "Activity function 'X' failed:  Type: msg"` (two spaces) and a .NET-shaped exception as Details."""
    return activity_failure_text(name, f"{type(exc).__name__}: {exc}", "".join(traceback.format_tb(exc.__traceback__)))


def activity_failure_text(name: str, message: str, stack: str) -> ActivityOutcome:
    """The same from the worker's `"{Type}: {message}"` text and stack trace."""
    friendly = f" {message}"
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
