"""The C# side of an episode: replay the SDK's action list against the history, like the extension + DTFx do.

`OutOfProcOrchestrationShim.ProcessAsyncActionsV2` invokes each top-level action and awaits it before invoking the
next (exceptions swallowed); WhenAll/WhenAny are C# `Task.WhenAll`/`Task.WhenAny`; continuations run synchronously
while DTFx replays the history, so sequence ids are allocated in exactly DTFx's order. This module re-derives that
with tiny callback futures and generator "coroutines" (durable-protocol.md §1.4). Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
import uuid
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from devhost.protocol import events as ev
from devhost.protocol.actions import Action, ActionType, OrchestratorOutput, RetryOptions, compact_json
from devhost.protocol.entity_messages import parse_scheduler_id, request_message
from devhost.protocol.events import Event, EventType
from devhost.protocol.timefmt import dotnet_roundtrip_o, parse_iso

# DF GuidManager.UrlNamespaceValue (NewGuid is RFC 4122 v5 over "{id}_{time:o}_{counter}").
_GUID_NAMESPACE = uuid.UUID("9e952959-5e33-4daf-827f-2fa12937b875")
_MAX_RETRY_INTERVAL = timedelta(days=6)
BUILTIN_HTTP_ACTIVITY = "BuiltIn::HttpActivity"

FunctionKind = Literal["activity", "orchestrator", "entity"]
PendingKind = Literal["activity", "timer", "suborchestration", "send_event"]
_HISTORY_KIND: dict[int, PendingKind] = {
    EventType.TaskScheduled: "activity",
    EventType.TimerCreated: "timer",
    EventType.SubOrchestrationInstanceCreated: "suborchestration",
    EventType.EventSent: "send_event",
}
_KIND_TEXT = {
    "activity": "an activity task",
    "timer": "a durable timer",
    "suborchestration": "a sub-orchestration",
    "send_event": "an event",
}


class _Future:
    """A C# task: completes once, runs continuations synchronously."""

    __slots__ = ("_callbacks", "done", "failed", "value")

    def __init__(self) -> None:
        self.done = False
        self.failed = False
        self.value: Any = None
        self._callbacks: list[Callable[[_Future], None]] = []

    def resolve(self, value: Any = None, *, failed: bool = False) -> None:
        if self.done:
            return
        self.done, self.failed, self.value = True, failed, value
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def then(self, callback: Callable[[_Future], None]) -> None:
        if self.done:
            callback(self)
        else:
            self._callbacks.append(callback)

    @classmethod
    def completed(cls, value: Any = None) -> _Future:
        fut = cls()
        fut.resolve(value)
        return fut


def _when_all(children: list[_Future]) -> _Future:
    result = _Future()
    remaining = [len(children)]

    def child_done(_: _Future) -> None:
        remaining[0] -= 1
        if remaining[0] == 0:
            first_failure = next((c for c in children if c.failed), None)
            result.resolve(first_failure.value if first_failure else None, failed=first_failure is not None)

    if not children:
        result.resolve([])
    for child in children:
        child.then(child_done)
    return result


def _when_any(children: list[_Future]) -> _Future:
    result = _Future()
    for child in children:
        child.then(lambda c: result.resolve(c))
    if not children:
        result.resolve(None)
    return result


Coroutine = Generator[_Future, None, Any]


def _spawn(coroutine: Coroutine) -> _Future:
    """Run a generator that yields futures; the returned future completes with its (ok, value) return."""
    result = _Future()

    def step(_: _Future | None = None) -> None:
        while True:
            try:
                awaited = next(coroutine)
            except StopIteration as stop:
                ok, value = stop.value
                result.resolve(value, failed=not ok)
                return
            if not awaited.done:
                awaited.then(step)
                return

    step()
    return result


@dataclass
class NewAction:
    """A decision of this episode: the history event to append and the work it sends out.

    The event is built only when asked for: most allocated actions are matched by history and never need it.
    """

    kind: PendingKind
    event_id: int
    make_event: Callable[[int], Event] = field(repr=False, compare=False)
    name: str | None = None
    input: str | None = None
    fire_at: datetime | None = None
    target_instance_id: str | None = None
    version: str | None = None
    _event: Event | None = field(default=None, repr=False, compare=False)

    @property
    def event(self) -> Event:
        if self._event is None:
            self._event = self.make_event(self.event_id)
        return self._event


@dataclass
class Completion:
    status: Literal["Completed", "Failed", "ContinuedAsNew"]
    result_json: str | None
    event_id: int


@dataclass
class ReplayResult:
    new_actions: list[NewAction] = field(default_factory=list)
    completion: Completion | None = None
    custom_status_json: str | None = None
    open_task_ids: list[int] = field(default_factory=list)


@dataclass
class ReplayContext:
    orchestrator_name: str
    instance_id: str
    execution_id: str
    now: datetime
    function_exists: Callable[[FunctionKind, str], bool]
    known_functions: Callable[[FunctionKind], list[str]] = lambda kind: []


def unknown_function_message(kind: FunctionKind, name: str, known: list[str]) -> str:
    """`ThrowIfFunctionDoesNotExist` text."""
    listed = ", ".join(f"'{k}'" for k in known)
    return (
        f"The function '{name}' doesn't exist, is disabled, or is not an {kind} function. Additional info: "
        f"The following are the known {kind} functions: {listed}."
    )


class NonDeterminismError(Exception):
    pass


class _Replayer:
    def __init__(self, ctx: ReplayContext, output: OrchestratorOutput) -> None:
        self.ctx = ctx
        self.output = output
        self.next_id = 0
        self.pending: dict[int, NewAction] = {}
        self.open: dict[int, _Future] = {}
        self.waiters: dict[str, list[_Future]] = {}
        self.buffered: dict[str, deque[str | None]] = {}
        self.current_time = ctx.now
        self.guid_counter = 0
        self.program_done = False
        self.fatal: str | None = None
        self.continue_as_new_input: str | None = None
        self.continued = False
        self._flat = _flat_actions(output)

    def can_continue(self, ctx: ReplayContext, output: OrchestratorOutput, flat: list[Action]) -> bool:
        """True if replaying `output` (`flat`: its actions) from scratch would reach this replayer's state at the events
        it has seen: same execution, program still waiting, and the earlier output's actions a prefix of the new
        one's."""
        old = self.output
        if self.fatal or self.program_done or self.continued or old.is_done or old.error is not None:
            return False
        if ctx.instance_id != self.ctx.instance_id or ctx.execution_id != self.ctx.execution_id:
            return False
        if output.is_v1 != old.is_v1 or output.raw_failure:
            return False
        if old.is_v1:
            return output.action_groups[:len(old.action_groups)] == old.action_groups
        return flat[:len(self._flat)] == self._flat

    def continue_with(self, ctx: ReplayContext, output: OrchestratorOutput, flat: list[Action]) -> None:
        self.ctx = ctx
        self.output = output
        self._flat = flat

    # ----- the program (ProcessAsyncActionsV2 / V1) -----

    def _program(self) -> Coroutine:
        # Indexes, not iterators: a replayer continued into the next episode reads the new output's longer list.
        position = 0
        if self.output.is_v1:
            while position < len(self.output.action_groups):
                position += 1
                yield _when_any([self._invoke(a) for a in self.output.action_groups[position - 1]])
        else:
            while position < len(self._flat):
                position += 1
                yield self._invoke(self._flat[position - 1])
        return True, None

    def _start_program(self) -> None:
        _spawn(self._program()).then(lambda _: setattr(self, "program_done", True))

    def _invoke(self, action: Action) -> _Future:
        if self.fatal:
            return _Future()
        invoke = _INVOKE.get(action.type)
        if invoke is None:
            self.fatal = f"devhost does not support action type {action.type.name} ({int(action.type)})"
            return _Future()
        return invoke(self, action)

    def _activity_with_retry(self, action: Action) -> _Future:
        return _spawn(self._with_retry(lambda: self._schedule_activity(action), action.retry))

    def _suborchestration_with_retry(self, action: Action) -> _Future:
        return _spawn(self._with_retry(lambda: self._schedule_suborchestration(action), action.retry))

    def _timer_action(self, action: Action) -> _Future:
        return self._create_timer(parse_iso(action.fire_at or ""), canceled=action.is_canceled)

    def _event_action(self, action: Action) -> _Future:
        return self._wait_for_event(action.event_name or "")

    def _continue_as_new(self, action: Action) -> _Future:
        self.continued = True
        self.continue_as_new_input = action.input
        return _Future.completed()

    def _entity_action(self, action: Action) -> _Future:
        return self._entity_operation(action, one_way=action.type != ActionType.CallEntity)

    def _when_all_action(self, action: Action) -> _Future:
        return _when_all([self._invoke(c) for c in action.children])

    def _when_any_action(self, action: Action) -> _Future:
        return _when_any([self._invoke(c) for c in action.children])

    def _http_action(self, action: Action) -> _Future:
        return self._call_http(action.http_request or {})

    def _allocate(self, kind: PendingKind, event: Callable[[int], Event], **fields: Any) -> int:
        event_id = self.next_id
        self.next_id += 1
        self.pending[event_id] = NewAction(kind=kind, event_id=event_id, make_event=event, **fields)
        return event_id

    def _require(self, kind: FunctionKind, name: str) -> bool:
        if self.ctx.function_exists(kind, name):
            return True
        self.fatal = unknown_function_message(kind, name, self.ctx.known_functions(kind))
        return False

    def _schedule_activity(self, action: Action) -> _Future:
        name = action.function_name or ""
        if not self._require("activity", name):
            return _Future()
        return self._schedule_task(name, action.input)

    def _schedule_task(self, name: str, input_text: str | None) -> _Future:
        now = self.ctx.now
        event_id = self._allocate(
            "activity", lambda i: ev.task_scheduled(now, i, name, input_text), name=name, input=input_text
        )
        return self._open(event_id)

    def _schedule_suborchestration(self, action: Action) -> _Future:
        name = action.function_name or ""
        if not self._require("orchestrator", name):
            return _Future()
        now = self.ctx.now
        child_input = json.dumps(action.input, ensure_ascii=False) if action.input is not None else None
        event_id = self.next_id
        child_id = action.instance_id or f"{self.ctx.execution_id}:{event_id}"
        if child_id.startswith("@"):
            self.fatal = f"Orchestration instance ids must not start with @: '{child_id}'."
            return _Future()
        self._allocate(
            "suborchestration",
            lambda i: ev.sub_orchestration_created(now, i, name, action.version, child_id, child_input),
            name=name,
            input=child_input,
            target_instance_id=child_id,
            version=action.version,
        )
        return self._open(event_id)

    def _call_http(self, request: dict[str, Any]) -> _Future:
        """`CallHttpAsync` as the built-in HTTP activity, one request, no 202 polling.

        The extension's C# polling loop would allocate sequence ids (timers, repeated requests) that the Python SDK
        never sees: its task resolves with the first TaskCompleted, i.e. the 202. So for Python the observable
        behaviour is "the 202 reaches the orchestrator, which polls itself"; devhost keeps ids aligned that way.
        """
        return self._schedule_task(BUILTIN_HTTP_ACTIVITY, compact_json(request))

    def _create_timer(self, fire_at: datetime, *, canceled: bool = False) -> _Future:
        now = self.ctx.now
        event_id = self._allocate("timer", lambda i: ev.timer_created(now, i, fire_at), fire_at=fire_at)
        if canceled:  # removed from openTasks at once; a later TimerFired is ignored
            return _Future.completed()
        return self._open(event_id)

    def _open(self, event_id: int) -> _Future:
        fut = _Future()
        self.open[event_id] = fut
        return fut

    def _with_retry(self, attempt: Callable[[], _Future], options: RetryOptions | None) -> Coroutine:
        """DTFx `RetryInterceptor`, including the extra timer at `now` after the last failure."""
        opts = options or RetryOptions(first_retry_ms=0, max_attempts=1)
        first_attempt = self.current_time
        last_failure: Any = None
        for attempt_no in range(max(opts.max_attempts, 1)):
            fut = attempt()
            yield fut
            if not fut.failed:
                return True, fut.value
            last_failure = fut.value
            delay = self._next_delay(opts, attempt_no, first_attempt)
            if attempt_no + 1 >= opts.max_attempts or delay is None:
                break
            yield self._create_timer(self.current_time + delay)
        yield self._create_timer(self.current_time)  # "for back-compat": Python's RetryAbleTask counts on it
        return False, last_failure

    def _next_delay(self, opts: RetryOptions, attempt_no: int, first_attempt: datetime) -> timedelta | None:
        if opts.retry_timeout_ms is not None and self.current_time >= first_attempt + timedelta(
            milliseconds=opts.retry_timeout_ms
        ):
            return None
        delay = timedelta(milliseconds=opts.first_retry_ms * (opts.backoff**attempt_no))
        cap = timedelta(milliseconds=opts.max_retry_ms) if opts.max_retry_ms else _MAX_RETRY_INTERVAL
        return min(delay, cap)

    def _wait_for_event(self, name: str) -> _Future:
        key = name.lower()
        queue = self.buffered.get(key)
        if queue:
            return _Future.completed(queue.popleft())
        fut = _Future()
        self.waiters.setdefault(key, []).append(fut)
        return fut

    def _deliver_event(self, name: str, payload: str | None) -> None:
        key = (name or "").lower()
        stack = self.waiters.get(key)
        if stack:
            stack.pop().resolve(payload)  # waiters are a stack (LIFO)
        else:
            self.buffered.setdefault(key, deque()).append(payload)  # buffered events are FIFO

    def _entity_operation(self, action: Action, *, one_way: bool) -> _Future:
        name, _key = parse_scheduler_id(action.instance_id or "")
        if not self.ctx.function_exists("entity", name):
            if one_way:  # SignalEntity's .Wait() rethrows synchronously: the orchestration fails
                self._require("entity", name)
            return _Future()  # CallEntity: the faulted task is swallowed, the call never completes
        guid = str(uuid.uuid5(_GUID_NAMESPACE, self._guid_name()))
        body = request_message(
            operation=action.operation or "",
            signal=one_way,
            input_text=json.dumps(action.input, ensure_ascii=False) if action.input is not None else None,
            request_id=guid,
            parent=self.ctx.instance_id,
            parent_execution=self.ctx.execution_id,
        )
        target = action.instance_id or ""
        now = self.ctx.now
        self._allocate("send_event", lambda i: ev.event_sent(now, i, target, "op", body), name="op", input=body,
                       target_instance_id=target)
        if one_way:
            return _Future.completed()
        return self._wait_for_event(guid)

    def _guid_name(self) -> str:
        text = f"{self.ctx.instance_id}_{dotnet_roundtrip_o(self.current_time)}_{self.guid_counter}"
        self.guid_counter += 1
        return text

    # ----- history -----

    def replay(self, history: list[Event]) -> None:
        for event in history:
            if self.fatal:
                return
            self._apply(event)

    def _apply(self, event: Event) -> None:
        apply = _APPLY.get(event["EventType"])
        if apply is not None:
            apply(self, event)

    def _orchestrator_started(self, event: Event) -> None:
        self.current_time = parse_iso(event["Timestamp"])

    def _execution_started(self, event: Event) -> None:
        self._start_program()

    def _scheduled(self, event: Event) -> None:
        self._match_scheduled(event, _HISTORY_KIND[event["EventType"]])

    def _succeeded(self, event: Event) -> None:
        self._complete(event["TaskScheduledId"], event.get("Result"), failed=False)

    def _failed(self, event: Event) -> None:
        self._complete(event["TaskScheduledId"], event.get("Reason"), failed=True)

    def _timer_fired(self, event: Event) -> None:
        self._complete(event["TimerId"], None, failed=False)

    def _event_raised(self, event: Event) -> None:
        self._deliver_event(event.get("Name") or "", event.get("Input"))

    def _complete(self, event_id: int, value: Any, *, failed: bool) -> None:
        fut = self.open.pop(event_id, None)
        if fut is not None:  # else a duplicate or a cancelled timer: DTFx ignores it
            fut.resolve(value, failed=failed)

    def _match_scheduled(self, event: Event, kind: str) -> None:
        event_id = event["EventId"]
        pending = self.pending.get(event_id)
        name = event.get("Name") or ""
        if pending is None or pending.kind != kind or (
            kind != "timer" and (pending.name or "").lower() != name.lower()
        ):
            raise NonDeterminismError(
                "Non-Deterministic workflow detected: A previous execution of this orchestration scheduled "
                f"{_KIND_TEXT[kind]} with sequence ID {event_id} and name '{name}' (version ''), but the current "
                "replay execution hasn't (yet?) scheduled this task. Was a change made to the orchestrator code "
                "after this instance had already started running?"
            )
        del self.pending[event_id]

    # ----- outcome -----

    def outcome(self) -> ReplayResult:
        result = ReplayResult(
            new_actions=[self.pending[i] for i in sorted(self.pending)],
            custom_status_json=self.output.custom_status_json,
            open_task_ids=sorted(self.open),
        )
        failed_text = self._failure_text()
        if failed_text is not None:
            result.completion = Completion("Failed", failed_text, self.next_id)
        elif self.program_done and self.output.is_done and not self.open:
            if self.continued:
                result.completion = Completion("ContinuedAsNew", self.continue_as_new_input, self.next_id)
            else:
                result.completion = Completion("Completed", self.output.output_json, self.next_id)
        return result

    def _failure_text(self) -> str | None:
        if self.fatal:
            return f"Orchestrator function '{self.ctx.orchestrator_name}' failed: {self.fatal}"
        if self.output.error is not None and (self.program_done or self.output.raw_failure):
            return f"Orchestrator function '{self.ctx.orchestrator_name}' failed: {self.output.error}"
        return None


# What each action does (OutOfProcOrchestrationShim's switch), and what each history event does to the replay.
_INVOKE: dict[int, Callable[[_Replayer, Action], _Future]] = {
    ActionType.CallActivity: _Replayer._schedule_activity,
    ActionType.CallActivityWithRetry: _Replayer._activity_with_retry,
    ActionType.CallSubOrchestrator: _Replayer._schedule_suborchestration,
    ActionType.CallSubOrchestratorWithRetry: _Replayer._suborchestration_with_retry,
    ActionType.CreateTimer: _Replayer._timer_action,
    ActionType.WaitForExternalEvent: _Replayer._event_action,
    ActionType.ContinueAsNew: _Replayer._continue_as_new,
    ActionType.CallEntity: _Replayer._entity_action,
    ActionType.SignalEntity: _Replayer._entity_action,
    ActionType.ScheduledSignalEntity: _Replayer._entity_action,
    ActionType.WhenAll: _Replayer._when_all_action,
    ActionType.WhenAny: _Replayer._when_any_action,
    ActionType.CallHttp: _Replayer._http_action,
}
_APPLY: dict[int, Callable[[_Replayer, Event], None]] = {
    EventType.OrchestratorStarted: _Replayer._orchestrator_started,
    EventType.ExecutionStarted: _Replayer._execution_started,
    **{kind: _Replayer._scheduled for kind in _HISTORY_KIND},
    EventType.TaskCompleted: _Replayer._succeeded,
    EventType.SubOrchestrationInstanceCompleted: _Replayer._succeeded,
    EventType.TaskFailed: _Replayer._failed,
    EventType.SubOrchestrationInstanceFailed: _Replayer._failed,
    EventType.TimerFired: _Replayer._timer_fired,
    EventType.EventRaised: _Replayer._event_raised,
}


def _flat_actions(output: OrchestratorOutput) -> list[Action]:
    return [action for group in output.action_groups for action in group]


@dataclass
class ReplayState:
    """A replayer that has applied the first `consumed` events of an execution's history, kept for the next episode
    so that it replays only the events after them (the SDK's action list only grows while an orchestration is
    deterministic; any other output is replayed from scratch)."""

    replayer: _Replayer
    consumed: int

    def waits_only_for(self, task_id: int) -> bool:
        """True if `task_id` is the only scheduled task (activity, timer, sub-orchestration) the orchestration still
        waits for: its completion leaves nothing else whose completion could be batched into the same episode."""
        return all(open_id == task_id for open_id in self.replayer.open)


# Tests set this: every continued replay is checked against a replay from scratch (same decisions and completion).
VERIFY_CONTINUED_REPLAY = False


def replay_continuing(state: ReplayState | None, ctx: ReplayContext, history: list[Event],
                      output: OrchestratorOutput) -> tuple[ReplayResult, ReplayState | None]:
    """`replay_episode`, continuing `state` (from the previous episode of this execution, whose history `history`
    extends) when it can. Returns the result and the state to keep for the next episode (None: start over)."""
    flat = _flat_actions(output) if state is not None else []
    if state is not None and state.consumed <= len(history) and state.replayer.can_continue(ctx, output, flat):
        replayer, events = state.replayer, history[state.consumed:]
        replayer.continue_with(ctx, output, flat)
        continued = True
    else:
        replayer, events, continued = _Replayer(ctx, output), history, False
    try:
        replayer.replay(events)
    except NonDeterminismError as exc:
        result = ReplayResult(completion=Completion("Failed", str(exc), replayer.next_id))
        return _verified(result, continued, ctx, history, output), None
    result = _verified(replayer.outcome(), continued, ctx, history, output)
    keep = result.completion is None and not replayer.fatal
    return result, ReplayState(replayer, len(history)) if keep else None


def _verified(result: ReplayResult, continued: bool, ctx: ReplayContext, history: list[Event],
              output: OrchestratorOutput) -> ReplayResult:
    if continued and VERIFY_CONTINUED_REPLAY:
        full = replay_episode(ctx, history, output)
        if _result_key(full) != _result_key(result):
            raise RuntimeError(f"continued replay differs from a full replay: {result!r} != {full!r}")
    return result


def _result_key(result: ReplayResult) -> tuple[Any, ...]:
    actions = [(a.kind, a.event_id, a.name, a.input, a.fire_at, a.target_instance_id, a.version, a.event)
               for a in result.new_actions]
    return actions, result.completion, result.custom_status_json, result.open_task_ids


def replay_episode(ctx: ReplayContext, history: list[Event], output: OrchestratorOutput) -> ReplayResult:
    """Replay `output`'s actions against `history` (past + this episode's new events).

    Returns the new decisions and, if the orchestration is over, its completion. A history that the actions do not
    explain gives a Failed completion with DTFx's non-determinism text (and no new decisions).
    """
    replayer = _Replayer(ctx, output)
    try:
        replayer.replay(history)
    except NonDeterminismError as exc:
        return ReplayResult(completion=Completion("Failed", str(exc), replayer.next_id))
    return replayer.outcome()
