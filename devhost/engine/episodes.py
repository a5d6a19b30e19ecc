"""One orchestration episode: take the instance's messages, call the orchestrator, replay its actions the C# way,
and commit history + decisions + outgoing messages in one transaction."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from devhost.app_loader import FunctionInfo
from devhost.engine.errors import SimulatedCrash
from devhost.engine.models import RuntimeStatus
from devhost.engine.state import Instance, completion_id
from devhost.engine.store import InboxMessage
from devhost.execution import run_on_pool
from devhost.function_timeout import FunctionTimeoutError, bounded
from devhost.invoke import invoke_orchestrator
from devhost.protocol import events as ev
from devhost.protocol.actions import OrchestratorOutput
from devhost.protocol.events import Event, EventType
from devhost.protocol.replay import (
    Completion,
    FunctionKind,
    NewAction,
    ReplayContext,
    ReplayResult,
    ReplayState,
    replay_continuing,
    unknown_function_message,
)
from devhost.protocol.timefmt import to_epoch
from devhost.protocol.trigger import orchestration_trigger_json
from devhost.workers import WorkerLostError

if TYPE_CHECKING:
    from devhost.engine.runtime import Commit, EngineRuntime

log = logging.getLogger("devhost.engine")

WAKE_EVENT_TYPE = -100  # internal inbox message (rewind): triggers an episode, never written to history
_COMPLETIONS = {EventType.TaskCompleted, EventType.TaskFailed, EventType.TimerFired,
                EventType.SubOrchestrationInstanceCompleted, EventType.SubOrchestrationInstanceFailed}
_COMPLETION_STATUS = {"Completed": RuntimeStatus.Completed, "Failed": RuntimeStatus.Failed,
                      "ContinuedAsNew": RuntimeStatus.ContinuedAsNew, "Terminated": RuntimeStatus.Terminated}


def dumps(event: Event) -> str:
    return ev.event_text(event)


@dataclass
class _Triage:
    consumed: list[int] = field(default_factory=list)  # removed from the inbox by this commit
    delivered: list[InboxMessage] = field(default_factory=list)  # new events of this episode
    held: list[InboxMessage] = field(default_factory=list)  # kept in the inbox while the instance is suspended
    suspended: bool = False


def _triage(instance: Instance, messages: list[InboxMessage]) -> _Triage:
    """Sort an episode's messages: stale/duplicate/late ones are dropped, suspension holds all but control events."""
    row = instance.row
    result = _Triage(suspended=row.status == RuntimeStatus.Suspended)
    over = RuntimeStatus(row.status).is_terminal
    for message in messages:
        event_type = message.event.get("EventType")
        stale = message.execution_id is not None and message.execution_id != row.execution_id
        # a redelivered completion (at-least-once) is dropped, as DTFx drops duplicates
        stale = stale or completion_id(message.event) in instance.completed_ids
        if stale or over:
            result.consumed.append(message.id)  # for another execution, or the instance is over: dropped
        elif event_type == EventType.ExecutionSuspended:
            result.consumed.append(message.id)
            if not result.suspended:
                result.suspended = True
                result.delivered.append(message)
        elif event_type == EventType.ExecutionResumed:
            result.consumed.append(message.id)
            if result.suspended:
                result.suspended = False
                result.delivered += [message, *result.held]
                result.consumed += [m.id for m in result.held]
                result.held = []
        elif result.suspended and event_type != EventType.ExecutionTerminated:
            result.held.append(message)  # held while suspended, replayed after the resume event
        else:
            result.consumed.append(message.id)
            result.delivered.append(message)
    started = any(m.event.get("EventType") == EventType.ExecutionStarted for m in result.delivered)
    if result.delivered and not instance.history and not started:
        # The execution has not started: its ExecutionStarted waits out an aborted episode's back-off. DTFx never
        # runs such a work item (TaskOrchestrationDispatcher.ReconcileMessagesWithState drops it, no history is
        # written) and the backends lock an instance with all its messages, so a terminate (or event) arriving
        # meanwhile is processed with the redelivered ExecutionStarted: held until then.
        waiting = {m.id for m in result.delivered} | {m.id for m in result.held}
        result.consumed = [i for i in result.consumed if i not in waiting]
        result.held = [m for m in messages if m.id in waiting]
        result.delivered = []
    return result


class EpisodeAbortedError(Exception):
    """The orchestrator invocation timed out or its worker process died: redeliver, as the extension does."""


@dataclass
class _Episode:
    triage: _Triage
    kind: Literal["nothing", "terminate", "suspended", "run"]
    new_events: list[Event] = field(default_factory=list)
    new_texts: list[str] = field(default_factory=list)  # their JSON texts (a message's as stored: encoded once)
    now: datetime = field(default_factory=lambda: datetime.min)
    terminate: Event | None = None
    status: RuntimeStatus | None = None  # the instance's status once the episode commits (None: unchanged)
    replay_state: ReplayState | None = None  # the replay to continue next episode, kept once this one commits

    @property
    def runs_orchestrator(self) -> bool:
        return self.kind == "run"


class EpisodeProcessor:
    def __init__(self, rt: EngineRuntime) -> None:
        self.rt = rt
        self._slots: asyncio.Semaphore | None = None
        index = rt.index
        self._finders = {"activity": index.activity, "orchestrator": index.orchestrator, "entity": index.entity}

    def ensure_history(self, instance: Instance) -> None:
        if instance.history is None:
            instance.set_history(self.rt.store.load_history(instance.row.instance_id))

    def start(self, instance_id: str) -> None:
        """Run the instance's next episode as a task (at most one per instance, `maxConcurrentOrchestratorFunctions`
        at once); the user's orchestrator code runs off the loop, bounded by `functionTimeout`."""
        rt = self.rt
        rt.running.add(instance_id)
        rt.spawn(self._run_in_slot(instance_id), name=f"episode {instance_id}")

    async def _run_in_slot(self, instance_id: str) -> None:
        rt = self.rt
        held = 0
        try:
            if self._slots is None:
                self._slots = asyncio.Semaphore(rt.options.max_concurrent_orchestrators)
            async with self._slots:
                held = await self.run(instance_id)
        finally:
            rt.running.discard(instance_id)
            if rt.inbox.count(instance_id) > held:  # messages arrived meanwhile (held ones wait for the resume)
                rt.mark_ready(instance_id)

    async def run(self, instance_id: str) -> int:
        """One episode; returns how many messages it put back to hold (suspended instance)."""
        rt = self.rt
        messages = rt.inbox.take(instance_id)
        if not messages or rt.closed or rt.stopping:
            rt.inbox.put_back(instance_id, messages)
            return 0
        if rt.options.faults.reorder_completions:
            self._shuffle_completions(messages)
        instance = rt.instances.get(instance_id)
        try:
            if instance is None:
                with rt.commit("episode") as commit:
                    commit.tx.delete_messages([m.id for m in messages])
                return 0
            self.ensure_history(instance)
            history = instance.history
            episode = self._prepare(instance, messages)
            result = await self._run_orchestrator(instance, episode) if episode.runs_orchestrator else None
            if rt.closed or rt.instances.get(instance_id) is not instance:
                return 0  # the engine stopped or the instance was purged meanwhile: nothing to commit
            with rt.commit("episode") as commit:
                self._apply(instance, episode, result, commit)
            # Held messages go back once the commit stands: a commit that fails puts every message back (_abandon),
            # and putting them back inside it too left two copies of each.
            rt.inbox.put_back(instance_id, episode.triage.held)
            if episode.runs_orchestrator and instance.history is history:  # (not replaced meanwhile, e.g. rewound)
                instance.replay_state = episode.replay_state  # committed: the replay matches the stored history
            return len(episode.triage.held)
        except SimulatedCrash:
            raise
        except EpisodeAbortedError as exc:
            # The extension's SessionAbortedException: the work item is abandoned and its messages redelivered with
            # back-off; the instance stays Running and the episode runs again.
            log.error("episode of %s aborted and retried in %.0f s: %s", instance_id,
                      rt.options.episode_retry_seconds, exc)
            self._abandon(instance_id, instance, messages, rt.options.episode_retry_seconds)
        except Exception:
            log.exception("episode of %s failed inside devhost; messages kept for a retry", instance_id)
            self._abandon(instance_id, instance, messages, None)
            return len(messages)  # retried when a new message arrives, not in a busy loop
        return 0

    def _abandon(self, instance_id: str, instance: Instance | None, messages: list[InboxMessage],
                 retry_seconds: float | None) -> None:
        rt = self.rt
        if rt.closed:
            return
        if retry_seconds is None:
            rt.inbox.put_back(instance_id, messages)
        else:
            rt.redeliver_later(messages, rt.now_epoch() + retry_seconds)
        if instance is not None:  # memory may be ahead of the store: reload it
            stored = rt.store.load_instance(instance_id)
            if stored is not None:
                instance.row = stored
            instance.forget_history()

    def _shuffle_completions(self, messages: list[InboxMessage]) -> None:
        """Fault injection: deliver task/timer/sub-orchestration completions in random order (as Azure Storage may)."""
        positions = [i for i, m in enumerate(messages) if m.event.get("EventType") in _COMPLETIONS]
        shuffled = [messages[i] for i in positions]
        self.rt.random.shuffle(shuffled)
        for position, message in zip(positions, shuffled, strict=True):
            messages[position] = message

    # ----- the episode -----

    def _prepare(self, instance: Instance, messages: list[InboxMessage]) -> _Episode:
        """Everything before the orchestrator runs; writes nothing (the commit after the run does)."""
        row = instance.row
        triage = _triage(instance, messages)
        delivered = self._without_duplicates(instance, triage.delivered)
        if not delivered:
            return _Episode(triage, "nothing")
        now = self.rt.clock.now()
        new_events = [ev.orchestrator_started(now)]
        new_texts = [dumps(new_events[0])]
        # ExecutionStarted leads (the SDK reads history[1]); events that arrived before a continue-as-new committed
        # its new ExecutionStarted belong to the new execution, after it.
        delivered.sort(key=lambda m: m.event.get("EventType") != EventType.ExecutionStarted)
        for message in delivered:
            if message.event.get("EventType") != WAKE_EVENT_TYPE:
                new_events.append(message.event)
                new_texts.append(message.text if message.text is not None else dumps(message.event))
        row.updated = to_epoch(now)
        terminate = next((e for e in new_events if e["EventType"] == EventType.ExecutionTerminated), None)
        if terminate is not None:
            return _Episode(triage, "terminate", new_events, new_texts, now, terminate)
        # The status changes with the commit, not before: a status read while the orchestrator runs (off the loop)
        # must not see Running without the custom status the same episode sets, as the host never shows it.
        started = any(e["EventType"] == EventType.ExecutionStarted for e in new_events)
        status = RuntimeStatus.Running if started else None
        if triage.suspended:
            return _Episode(triage, "suspended", new_events, new_texts, now, status=RuntimeStatus.Suspended)
        if row.status == RuntimeStatus.Suspended:
            status = RuntimeStatus.Running
        return _Episode(triage, "run", new_events, new_texts, now, status=status)

    def _apply(self, instance: Instance, episode: _Episode, result: ReplayResult | None, commit: Commit) -> None:
        row = instance.row
        commit.tx.delete_messages(episode.triage.consumed)
        if episode.kind == "nothing":
            return
        commit.changed.add(row.instance_id)
        if episode.status is not None:
            row.status = episode.status
        if episode.kind == "terminate" and episode.terminate is not None:
            self._finish_terminated(instance, episode, episode.terminate, commit)
        elif episode.kind == "suspended":
            self._append(instance, [*episode.new_events, ev.orchestrator_completed(episode.now)], commit,
                         episode.new_texts)
        elif result is not None:
            self._commit_result(instance, episode, result, commit)

    @staticmethod
    def _without_duplicates(instance: Instance, delivered: list[InboxMessage]) -> list[InboxMessage]:
        kept = []
        for message in delivered:
            done_id = completion_id(message.event)
            if done_id is not None:
                if done_id in instance.completed_ids:
                    continue
                instance.completed_ids.add(done_id)
            kept.append(message)
        return kept

    async def _run_orchestrator(self, instance: Instance, episode: _Episode) -> ReplayResult:
        row = instance.row
        new_events, now = episode.new_events, episode.now
        history = (instance.history or []) + new_events
        function = self.rt.index.orchestrator(row.name)
        ctx = ReplayContext(
            orchestrator_name=row.name,
            instance_id=row.instance_id,
            execution_id=row.execution_id,
            now=now,
            function_exists=self._function_exists,
            known_functions=self._known_functions,
        )
        if function is None:
            text = unknown_function_message("orchestrator", row.name, self._known_functions("orchestrator"))
            return ReplayResult(completion=Completion("Failed", text, 0))
        started = next(e for e in history if e["EventType"] == EventType.ExecutionStarted)
        trigger = orchestration_trigger_json(
            (instance.history_texts or []) + episode.new_texts,
            input_json=started.get("Input"),
            instance_id=row.instance_id,
            is_replaying=bool(started.get("IsPlayed")),
            parent_instance_id=(row.parent or {}).get("instance_id"),
            storage_provider=self.rt.options.storage_provider,
        )
        # Taken out while the episode runs: an episode that does not commit leaves no replay ahead of the history.
        state, instance.replay_state = instance.replay_state, None
        output = await self._invoke(function, trigger, state.replayer.output if state is not None else None)
        result, episode.replay_state = replay_continuing(state, ctx, history, output)
        return result

    async def _invoke(
        self, function: FunctionInfo, trigger: str, previous: OrchestratorOutput | None = None
    ) -> OrchestratorOutput:
        """The user's orchestrator code, off the loop: a hang is cut at `functionTimeout`, a dead worker process is
        reported; both abort the episode (the extension's SessionAbortedException), never the host."""
        rt = self.rt
        run_orchestrator = getattr(rt.functions, "run_orchestrator", None)  # an executor may not run orchestrators
        call = run_orchestrator(function, trigger, previous) if run_orchestrator is not None \
            else run_on_pool(rt.executor, invoke_orchestrator, function, trigger, previous)
        try:
            return await bounded(call, rt.options.function_timeout, function.name, rt.functions)
        except FunctionTimeoutError as exc:
            raise EpisodeAbortedError(str(exc)) from exc
        except WorkerLostError as exc:
            raise EpisodeAbortedError(f"the worker process running '{function.name}' exited: {exc}") from exc

    def _function_exists(self, kind: FunctionKind, name: str) -> bool:
        return self._finders[kind](name) is not None

    def _known_functions(self, kind: FunctionKind) -> list[str]:
        index = self.rt.index
        if kind == "activity":
            return [f.name for f in index.activities()]
        if kind == "orchestrator":
            return [f.name for f in index.orchestrators()]
        return [f.entity_name or f.name for f in index.entities()]

    # ----- committing -----

    def _append(self, instance: Instance, new_events: list[Event], commit: Commit, known_texts: list[str]) -> None:
        """Append the events (message events as played) to the history; `known_texts`: the texts of the first ones."""
        played = [ev.as_played(e) for e in new_events]
        known = len(known_texts)
        texts = [ev.played_text(e, known_texts[i]) if i < known else dumps(played[i]) for i, e in enumerate(new_events)]
        history, history_texts = instance.loaded_history()
        commit.tx.append_history(instance.row.instance_id, len(history), texts)
        history.extend(played)
        history_texts.extend(texts)
        commit.tx.put_instance(instance.row)

    def _commit_result(self, instance: Instance, episode: _Episode, result: ReplayResult, commit: Commit) -> None:
        row, new_events = instance.row, episode.new_events
        now = self.rt.clock.now()
        if result.custom_status_json is not None:
            row.custom_status = result.custom_status_json
        appended = list(new_events) + [a.event for a in result.new_actions] + [ev.orchestrator_completed(now)]
        for action in result.new_actions:
            self._send_action(instance, action, commit)
        completion = result.completion
        if completion is None:
            self._append(instance, appended, commit, episode.new_texts)
            return
        status = _COMPLETION_STATUS[completion.status]
        if status == RuntimeStatus.ContinuedAsNew:
            self._continue_as_new(instance, completion, commit)
            return
        appended.append(ev.execution_completed(now, completion.event_id, status.dtfx_code, completion.result_json))
        row.status = status
        row.output = completion.result_json
        self._append(instance, appended, commit, episode.new_texts)
        self._notify_parent(instance, status, completion.result_json, commit)
        instance.forget_history()

    def _send_action(self, instance: Instance, action: NewAction, commit: Commit) -> None:
        row = instance.row
        if action.kind == "activity":
            commit.schedule_activity(row.instance_id, row.execution_id, action.event_id, action.name or "",
                                     action.input)
        elif action.kind == "timer":
            if action.fire_at is None:
                raise ValueError(f"timer {action.event_id} of {row.instance_id!r} has no fire time")
            fired = ev.timer_fired(action.fire_at, action.event_id, action.event["FireAt"])
            commit.send(row.instance_id, row.execution_id, fired, visible_at=to_epoch(action.fire_at))
        elif action.kind == "suborchestration":
            self._start_child(instance, action, commit)
        elif action.kind == "send_event":
            target = action.target_instance_id or ""
            commit.send(target, None, ev.event_raised(self.rt.clock.now(), "op", action.input))
            if target.startswith("@"):
                self.rt.entity_processor.ensure_known(target)

    def _start_child(self, parent: Instance, action: NewAction, commit: Commit) -> None:
        child_id = action.target_instance_id or ""
        existing = self.rt.instances.get(child_id)
        now = self.rt.clock.now()
        if existing is not None and not existing.status.is_terminal:
            reason = f"An orchestration with instance ID '{child_id}' already exists and is {existing.status}."
            failed = ev.sub_orchestration_failed(now, action.event_id, reason, None)
            commit.send(parent.row.instance_id, parent.row.execution_id, failed)
            return
        parent_info = {
            "instance_id": parent.row.instance_id,
            "execution_id": parent.row.execution_id,
            "task_id": action.event_id,
            "name": parent.row.name,
        }
        self.rt.create_instance(commit, child_id, action.name or "", action.version, action.input, parent_info)

    def _continue_as_new(self, instance: Instance, completion: Completion, commit: Commit) -> None:
        row = instance.row
        new_input = json.dumps(completion.result_json, ensure_ascii=False) if completion.result_json else None
        row.status = RuntimeStatus.ContinuedAsNew
        row.execution_id = uuid.uuid4().hex
        row.input = new_input
        row.output = None
        commit.tx.reset_history(row.instance_id)
        instance.set_history([])
        commit.tx.put_instance(row)
        started = ev.execution_started(
            self.rt.clock.now(), instance_id=row.instance_id, execution_id=row.execution_id, name=row.name,
            version=row.version, input_json=new_input, parent=self.rt.parent_instance_json(row.parent),
        )
        commit.send(row.instance_id, row.execution_id, started)

    def _finish_terminated(self, instance: Instance, episode: _Episode, terminate: Event, commit: Commit) -> None:
        now = self.rt.clock.now()
        reason = terminate.get("Input")
        row = instance.row
        row.status = RuntimeStatus.Terminated
        row.output = reason
        events = [*episode.new_events, ev.orchestrator_completed(now),
                  ev.execution_completed(now, -1, RuntimeStatus.Terminated.dtfx_code, reason)]
        self._append(instance, events, commit, episode.new_texts)
        self._notify_parent(instance, RuntimeStatus.Terminated, reason, commit)
        instance.forget_history()

    def _notify_parent(self, instance: Instance, status: RuntimeStatus, result: str | None, commit: Commit) -> None:
        parent = instance.row.parent
        if not parent:
            return
        now = self.rt.clock.now()
        if status == RuntimeStatus.Completed:
            event = ev.sub_orchestration_completed(now, parent["task_id"], result)
        else:
            event = ev.sub_orchestration_failed(now, parent["task_id"], result or "", None)
        commit.send(parent["instance_id"], parent["execution_id"], event)
