"""Entity scheduler (legacy out-of-proc protocol, durable-protocol.md E.6): per-entity FIFO queue, one batch in
flight per entity, one function call per batch on a worker thread, state + responses + signals committed
atomically per batch; internal errors leave the messages queued and retry with back-off.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING

from devhost.engine.store import EntityRow, InboxMessage
from devhost.function_timeout import FunctionTimeoutError, bounded, timeout_message
from devhost.invoke import invoke_entity_batch
from devhost.protocol import events as ev
from devhost.protocol.entity_messages import (
    BatchResult,
    EntityInternalError,
    EntityRequest,
    OperationResult,
    batch_request_json,
    parse_scheduler_id,
    request_message,
    response_message,
    scheduler_id,
)
from devhost.protocol.timefmt import to_epoch
from devhost.workers import WorkerLostError

if TYPE_CHECKING:
    from devhost.engine.runtime import EngineRuntime

log = logging.getLogger("devhost.engine")


def _timed_out(row: EntityRow, function_name: str, size: int, seconds: float) -> BatchResult:
    """E.6.5: every operation fails with the (non-JSON) timeout text; state unchanged; no signals."""
    text = timeout_message(timedelta(seconds=seconds), function_name)
    return BatchResult(exists=row.exists, state=row.state, results=[OperationResult(True, text)] * size, signals=[])


class EntityProcessor:
    def __init__(self, rt: EngineRuntime) -> None:
        self.rt = rt
        self._slots: asyncio.Semaphore | None = None

    def ensure_known(self, entity_id: str) -> None:
        """Nothing to do up front: entities are auto-created by their first committed batch."""

    def start(self, entity_id: str) -> None:
        rt = self.rt
        messages = rt.inbox.take(entity_id, rt.options.entity_batch_size)
        rt.running.add(entity_id)
        rt.spawn(self._run(entity_id, messages), name=f"entity {entity_id}")

    async def _run(self, entity_id: str, messages: list[InboxMessage]) -> None:
        rt = self.rt
        try:
            if self._slots is None:
                self._slots = asyncio.Semaphore(rt.options.max_concurrent_entities)
            async with self._slots:
                if rt.stopping:
                    return  # the host stops: a batch not started yet stays stored and runs after the restart
                await self._batch(entity_id, messages)
        finally:
            rt.running.discard(entity_id)
            if rt.inbox.count(entity_id):
                rt.mark_ready(entity_id)

    async def _batch(self, entity_id: str, messages: list[InboxMessage]) -> None:
        rt = self.rt
        name, key = parse_scheduler_id(entity_id)
        requests = [EntityRequest.from_json(m.event.get("Input") or "{}") for m in messages]
        function = rt.index.entity(name)
        row = rt.entities.get(entity_id) or EntityRow(entity_id, name, key, False, None, None)
        if function is None:
            log.error("no entity function '%s': %d message(s) dropped", name, len(messages))
            with rt.commit() as commit:
                commit.tx.delete_messages([m.id for m in messages])
            return
        batch_json = batch_request_json(name, key, row.exists, row.state, requests)
        run_batch = getattr(rt.functions, "run_entity_batch", None)  # worker processes, when the host has some
        call = run_batch(function, batch_json, len(requests)) if run_batch is not None else \
            rt.loop.run_in_executor(rt.executor, invoke_entity_batch, function, batch_json, len(requests))
        try:
            result = await bounded(call, rt.options.function_timeout, function.name, rt.functions)
        except FunctionTimeoutError:
            result = _timed_out(row, function.name, len(requests), rt.options.function_timeout_seconds or 0)
        except (EntityInternalError, WorkerLostError) as exc:  # a dead worker is an internal error too (E.6.5)
            # The extension aborts the batch and redelivers the same messages with back-off (no partial commit).
            log.error("entity %s batch aborted (%s); retrying", entity_id, exc)
            if rt.closed:
                return
            rt.redeliver_later(messages, rt.now_epoch() + rt.options.entity_retry_seconds)
            return
        if rt.closed:
            return
        self._commit(entity_id, row, messages, requests, result)

    def _commit(self, entity_id: str, row: EntityRow, messages: list[InboxMessage], requests: list[EntityRequest],
                result: BatchResult) -> None:
        rt = self.rt
        now = rt.clock.now()
        updated = EntityRow(entity_id, row.name, row.key, result.exists, result.state, to_epoch(now))
        with rt.commit("entity") as commit:
            commit.tx.put_entity(updated)
            commit.tx.delete_messages([m.id for m in messages])
            for request, outcome in zip(requests, result.results, strict=False):
                if request.is_signal or not request.parent:
                    continue
                target = rt.instances.get(request.parent)
                if target is None or target.row.execution_id != request.parent_execution:
                    continue  # the caller's execution is gone: the late response is dropped
                if target.status.is_terminal:
                    continue
                body = response_message(outcome.result, outcome.is_error)
                commit.send(request.parent, request.parent_execution, ev.event_raised(now, request.request_id, body))
            for signal in result.signals:
                body = request_message(operation=signal.operation, signal=True, input_text=signal.input,
                                       request_id=str(uuid.uuid4()), parent=entity_id, parent_execution=None)
                target_id = scheduler_id(signal.target_name, signal.target_key)
                commit.send(target_id, None, ev.event_raised(now, "op", body))
        rt.entities[entity_id] = updated
