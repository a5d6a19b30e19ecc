"""The API's view of Durable Functions: start a run, read its progress, send it approvals and cancels.

A thin wrapper over the SDK's `DurableOrchestrationClient` so handlers speak in run terms and the event names and
payload shapes live in one place (`agent_runs.contracts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import azure.durable_functions as df
from pydantic import ValidationError

from agent_runs.contracts import (
    APPROVAL_EVENT,
    CANCEL_EVENT,
    ORCHESTRATOR_NAME,
    ApprovalEvent,
    CancelEvent,
    RunInput,
    RunProgress,
)


@dataclass(frozen=True)
class OrchestrationState:
    runtime_status: str  # Pending, Running, Completed, Failed, Terminated, Suspended, ContinuedAsNew
    progress: RunProgress | None
    output: Any


class DurableGateway:
    def __init__(self, client: df.DurableOrchestrationClient) -> None:
        self._client = client

    async def start_run(self, run_input: RunInput) -> None:
        await self._client.start_new(ORCHESTRATOR_NAME, run_input.run.run_id, run_input.model_dump(mode="json"))

    async def state(self, run_id: str) -> OrchestrationState | None:
        status = await self._client.get_status(run_id)
        if not status or status.runtime_status is None:
            return None
        progress = None
        if isinstance(status.custom_status, dict):
            try:
                progress = RunProgress.model_validate(status.custom_status)
            except ValidationError:
                progress = None
        return OrchestrationState(status.runtime_status.value, progress, status.output)

    async def send_approval(self, run_id: str, approval_id: str) -> None:
        await self._client.raise_event(run_id, APPROVAL_EVENT, ApprovalEvent(approval_id=approval_id).model_dump())

    async def send_cancel(self, run_id: str, reason: str | None) -> None:
        await self._client.raise_event(run_id, CANCEL_EVENT, CancelEvent(reason=reason).model_dump())
