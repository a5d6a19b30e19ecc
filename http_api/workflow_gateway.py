"""The workflow API's view of Durable Functions: start a workflow, read its progress, send it signals/cancels."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import azure.durable_functions as df
from pydantic import ValidationError

from workflow_runtime.contracts import (
    CANCEL_EVENT,
    ORCHESTRATOR_NAME,
    WorkflowInput,
    WorkflowProgress,
    signal_event,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkflowState:
    runtime_status: str
    progress: WorkflowProgress | None
    output: Any


class WorkflowGateway:
    def __init__(self, client: df.DurableOrchestrationClient) -> None:
        self._client = client

    async def start(self, workflow_input: WorkflowInput) -> None:
        ref = workflow_input.ref
        await self._client.start_new(ORCHESTRATOR_NAME, ref.run_id, workflow_input.model_dump(mode="json"))

    async def state(self, run_id: str) -> WorkflowState | None:
        status = await self._client.get_status(run_id)
        if not status or status.runtime_status is None:
            return None
        progress = None
        if isinstance(status.custom_status, dict):
            try:
                progress = WorkflowProgress.model_validate(status.custom_status)
            except ValidationError:
                progress = None
        return WorkflowState(status.runtime_status.value, progress, status.output)

    async def send_signal(self, run_id: str, name: str, signal_id: str) -> None:
        await self._client.raise_event(run_id, signal_event(name), {"signal_id": signal_id})

    async def send_cancel(self, instance_id: str, reason: str) -> bool:
        """Ask an orchestration (the workflow or a child run) to cancel; False if it no longer takes events."""
        try:
            await self._client.raise_event(instance_id, CANCEL_EVENT, {"reason": reason})
        except Exception as error:  # 404 (not started yet) / 410 (already finished): nothing left to cancel there
            log.info("cancel not delivered to %s: %s", instance_id, error)
            return False
        return True
