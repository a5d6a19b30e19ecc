"""Management operations behind the engine API (start, status, queries, events, terminate/suspend/resume, rewind,
restart, purge, entity signals and reads). Mixed into `EngineRuntime`; every write is one commit."""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any

from devhost.engine.episodes import WAKE_EVENT_TYPE, dumps
from devhost.engine.errors import (
    InstanceExistsError,
    InstanceGoneError,
    InstanceNotFoundError,
    InvalidEntityKeyError,
    InvalidInstanceIdError,
    InvalidOperationError,
    UnknownFunctionError,
)
from devhost.engine.models import EntityQuery, EntityState, InstanceQuery, InstanceStatus, RuntimeStatus
from devhost.engine.state import Instance
from devhost.engine.store import InstanceRow
from devhost.protocol import events as ev
from devhost.protocol.entity_messages import key_problem, request_message, scheduler_id
from devhost.protocol.events import EventType
from devhost.protocol.history_view import shape_history
from devhost.protocol.replay import unknown_function_message
from devhost.protocol.timefmt import from_epoch, to_epoch

if TYPE_CHECKING:
    from devhost.engine.runtime import Commit, EngineRuntime

MAX_INSTANCE_ID_LENGTH = 256
_INVALID_ID_CHARS = re.compile(r"[/\\?#\x00-\x1f\x7f-\x9f]")  # / \ ? # and control characters
_RUNNING = {RuntimeStatus.Pending, RuntimeStatus.Running, RuntimeStatus.Suspended, RuntimeStatus.ContinuedAsNew}


def validate_instance_id(instance_id: str) -> None:
    if not instance_id or instance_id.startswith("@"):
        raise InvalidInstanceIdError(f"Orchestration instance ids must not start with @: '{instance_id}'.")
    if len(instance_id) > MAX_INSTANCE_ID_LENGTH:
        raise InvalidInstanceIdError(f"Instance ID lengths must not exceed {MAX_INSTANCE_ID_LENGTH} characters.")
    if _INVALID_ID_CHARS.search(instance_id):
        raise InvalidInstanceIdError(
            f"Instance ID '{instance_id}' contains invalid characters (/, \\, ?, # or control characters)."
        )


def _page(items: list[Any], top: int | None, token: str | None) -> tuple[list[Any], str | None]:
    start = int(token) if token and token.isdigit() else 0
    if not top or top <= 0:
        return items[start:], None
    end = start + top
    return items[start:end], (str(end) if end < len(items) else None)


class Management:
    """API operations; `self` is the EngineRuntime."""

    # ----- helpers used by episodes too -----

    def parent_instance_json(self: EngineRuntime, parent: dict[str, Any] | None) -> dict[str, Any] | None:
        if not parent:
            return None
        return {
            "Name": parent["name"],
            "Version": "",
            "TaskScheduleId": parent["task_id"],
            "OrchestrationInstance": {"InstanceId": parent["instance_id"], "ExecutionId": parent["execution_id"]},
        }

    def create_instance(self: EngineRuntime, commit: Commit, instance_id: str, name: str, version: str | None,
                        input_json: str | None, parent: dict[str, Any] | None) -> None:
        """Replace any previous (terminal) instance of that id and enqueue its ExecutionStarted."""
        now = self.clock.now()
        execution_id = uuid.uuid4().hex
        if instance_id in self.instances:
            commit.tx.delete_instance(instance_id)
            self.inbox.drop_instance(instance_id)
        row = InstanceRow(instance_id, name, version, execution_id, RuntimeStatus.Pending.value, input_json, None,
                          None, to_epoch(now), to_epoch(now), parent)
        commit.tx.put_instance(row)
        instance = Instance(row)
        instance.set_history([])
        self.instances[instance_id] = instance
        started = ev.execution_started(now, instance_id=instance_id, execution_id=execution_id, name=name,
                                       version=version, input_json=input_json,
                                       parent=self.parent_instance_json(parent))
        commit.send(instance_id, execution_id, started)
        commit.changed.add(instance_id)

    def _instance(self: EngineRuntime, instance_id: str) -> Instance:
        instance = self.instances.get(instance_id)
        if instance is None:
            raise InstanceNotFoundError(f"No instance with ID '{instance_id}' found.")
        return instance

    def _live_instance(self: EngineRuntime, instance_id: str) -> Instance:
        instance = self._instance(instance_id)
        if instance.status.is_terminal:
            raise InstanceGoneError(f"The instance '{instance_id}' is in the {instance.status} state.")
        return instance

    def _send_control(self: EngineRuntime, instance: Instance, event: dict[str, Any]) -> None:
        with self.commit() as commit:
            commit.send(instance.row.instance_id, None, event)

    # ----- orchestrations -----

    async def start_new(self: EngineRuntime, name: str, instance_id: str | None, input_json: str | None,
                        version: str | None) -> str:
        self.ensure_open()
        function = self.index.orchestrator(name)
        if function is None:
            known = [f.name for f in self.index.orchestrators()]
            raise UnknownFunctionError(unknown_function_message("orchestrator", name, known))
        instance_id = instance_id or uuid.uuid4().hex
        validate_instance_id(instance_id)
        existing = self.instances.get(instance_id)
        if existing is not None and existing.status in _RUNNING:
            raise InstanceExistsError(
                f"An Orchestration instance with the status {existing.status} already exists."
            )
        with self.commit() as commit:
            self.create_instance(commit, instance_id, function.name, version, input_json, None)
        return instance_id

    async def get_status(self: EngineRuntime, instance_id: str, show_history: bool, show_history_output: bool,
                         show_input: bool) -> InstanceStatus | None:
        instance = self.instances.get(instance_id)
        if instance is None:
            return None
        history = None
        if show_history:
            self.episodes.ensure_history(instance)
            history = shape_history(instance.history or [], show_output=show_history_output, show_input=show_input)
        return self._status_of(instance, show_input, history)

    def _status_of(self: EngineRuntime, instance: Instance, show_input: bool,
                   history: list[dict[str, Any]] | None = None) -> InstanceStatus:
        row = instance.row
        return InstanceStatus(
            name=row.name, instance_id=row.instance_id, execution_id=row.execution_id,
            runtime_status=RuntimeStatus(row.status), input_json=row.input, output_json=row.output,
            custom_status_json=row.custom_status, created_time=from_epoch(row.created),
            last_updated_time=from_epoch(row.updated), parent_instance_id=(row.parent or {}).get("instance_id"),
            history_events=history, show_input=show_input,
        )

    def _matching(self: EngineRuntime, q: InstanceQuery) -> list[Instance]:
        found = []
        for instance in self.instances.values():
            row = instance.row
            if q.created_time_from and row.created < to_epoch(q.created_time_from):
                continue
            if q.created_time_to and row.created > to_epoch(q.created_time_to):
                continue
            if q.runtime_status is not None and RuntimeStatus(row.status) not in q.runtime_status:
                continue
            if q.instance_id_prefix and not row.instance_id.startswith(q.instance_id_prefix):
                continue
            found.append(instance)
        found.sort(key=lambda i: (i.row.created, i.row.instance_id))
        return found

    async def query_instances(self: EngineRuntime, q: InstanceQuery) -> tuple[list[InstanceStatus], str | None]:
        page, token = _page(self._matching(q), q.top, q.continuation_token)
        return [self._status_of(i, q.show_input) for i in page], token

    async def raise_event(self: EngineRuntime, instance_id: str, name: str, input_json: str | None) -> None:
        self.ensure_open()
        instance = self._live_instance(instance_id)
        self._send_control(instance, ev.event_raised(self.clock.now(), name, input_json))

    async def terminate(self: EngineRuntime, instance_id: str, reason: str | None) -> None:
        self.ensure_open()
        instance = self._live_instance(instance_id)
        self._send_control(instance, ev.execution_terminated(self.clock.now(), reason))

    async def suspend(self: EngineRuntime, instance_id: str, reason: str | None) -> None:
        self.ensure_open()
        instance = self._live_instance(instance_id)
        self._send_control(instance, ev.execution_suspended(self.clock.now(), reason))

    async def resume(self: EngineRuntime, instance_id: str, reason: str | None) -> None:
        self.ensure_open()
        instance = self._live_instance(instance_id)
        self._send_control(instance, ev.execution_resumed(self.clock.now(), reason))

    async def rewind(self: EngineRuntime, instance_id: str, reason: str | None) -> None:
        """Drop failed task/sub-orchestration results (with their scheduling events) and the failure, then replay:
        the C# replay schedules those tasks again under the same sequence ids."""
        self.ensure_open()
        instance = self._instance(instance_id)
        if instance.status != RuntimeStatus.Failed:
            raise InvalidOperationError(f"Instance '{instance_id}' is {instance.status}, only Failed can rewind.")
        self.episodes.ensure_history(instance)
        history = instance.history or []
        failed_ids = {e["TaskScheduledId"] for e in history
                      if e["EventType"] in (EventType.TaskFailed, EventType.SubOrchestrationInstanceFailed)}
        scheduling = (EventType.TaskScheduled, EventType.SubOrchestrationInstanceCreated)
        kept = [e for e in history
                if e["EventType"] not in (EventType.TaskFailed, EventType.SubOrchestrationInstanceFailed,
                                          EventType.ExecutionCompleted)
                and not (e["EventType"] in scheduling and e["EventId"] in failed_ids)]
        texts = [dumps(e) for e in kept]
        with self.commit() as commit:
            instance.row.status = RuntimeStatus.Running.value
            instance.row.output = None
            commit.tx.put_instance(instance.row)
            commit.tx.replace_history(instance_id, texts)
            instance.set_history(texts)
            commit.send(instance_id, instance.row.execution_id, {"EventType": WAKE_EVENT_TYPE, "Reason": reason})
            commit.changed.add(instance_id)

    async def restart(self: EngineRuntime, instance_id: str, new_instance_id: bool) -> str:
        self.ensure_open()
        instance = self._instance(instance_id)
        target = uuid.uuid4().hex if new_instance_id else instance_id
        if not new_instance_id and instance.status in _RUNNING:
            raise InstanceExistsError(f"An Orchestration instance with the status {instance.status} already exists.")
        self.episodes.ensure_history(instance)
        started = next((e for e in instance.history or [] if e["EventType"] == EventType.ExecutionStarted), None)
        original_input = started.get("Input") if started else instance.row.input
        with self.commit() as commit:
            self.create_instance(commit, target, instance.row.name, instance.row.version, original_input, None)
        return target

    def _purge(self: EngineRuntime, commit: Commit, instance: Instance) -> None:
        instance_id = instance.row.instance_id
        commit.tx.delete_instance(instance_id)
        self.inbox.drop_instance(instance_id)
        del self.instances[instance_id]

    async def purge(self: EngineRuntime, instance_id: str) -> int:
        self.ensure_open()
        instance = self.instances.get(instance_id)
        if instance is None or not instance.status.is_terminal:
            return 0  # Azure Storage purges only instances in a terminal state
        with self.commit() as commit:
            self._purge(commit, instance)
        return 1

    async def purge_by(self: EngineRuntime, q: InstanceQuery) -> int:
        self.ensure_open()
        victims = [i for i in self._matching(q) if i.status.is_terminal]
        with self.commit() as commit:
            for instance in victims:
                self._purge(commit, instance)
        return len(victims)

    # ----- entities -----

    async def signal_entity(self: EngineRuntime, name: str, key: str, operation: str,
                            input_json: str | None) -> None:
        self.ensure_open()
        problem = key_problem(key)
        if problem:
            raise InvalidEntityKeyError(problem)
        if self.index.entity(name) is None:
            known = [f.entity_name or f.name for f in self.index.entities()]
            raise UnknownFunctionError(unknown_function_message("entity", name, known))
        body = request_message(operation=operation, signal=True, input_text=input_json,
                               request_id=str(uuid.uuid4()), parent=None, parent_execution=None)
        with self.commit() as commit:
            commit.send(scheduler_id(name, key), None, ev.event_raised(self.clock.now(), "op", body))

    def _entity_state(self: EngineRuntime, entity_id: str) -> EntityState | None:
        row = self.entities.get(entity_id)
        if row is None:
            return None
        last = from_epoch(row.last_op) if row.last_op is not None else None
        return EntityState(name=row.name, key=row.key, exists=row.exists, state_json=row.state,
                           last_operation_time=last)

    async def read_entity(self: EngineRuntime, name: str, key: str) -> EntityState | None:
        state = self._entity_state(scheduler_id(name, key))
        return state if state is not None and state.exists else None

    async def query_entities(self: EngineRuntime, q: EntityQuery) -> tuple[list[EntityState], str | None]:
        prefix = scheduler_id(q.name, "") if q.name else "@"
        states = []
        for entity_id in sorted(self.entities):
            state = self._entity_state(entity_id)
            if not entity_id.startswith(prefix) or state is None or not state.exists:
                continue
            last = state.last_operation_time
            if q.last_operation_time_from and (last is None or last < q.last_operation_time_from):
                continue
            if q.last_operation_time_to and (last is None or last > q.last_operation_time_to):
                continue
            states.append(state)
        return _page(states, q.top, q.continuation_token)
