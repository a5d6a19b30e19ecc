"""The workflow API's view of Durable Functions: start a workflow, read its progress, send it signals/cancels."""

from __future__ import annotations

import azure.durable_functions as df

from http_api.durable_gateway import DurableGateway, OrchestrationState, orchestration_state
from workflow_runtime.contracts import (
    CANCEL_EVENT,
    ORCHESTRATOR_NAME,
    WorkflowInput,
    WorkflowProgress,
    signal_event,
)

WorkflowState = OrchestrationState[WorkflowProgress]


class WorkflowGateway:
    def __init__(self, client: df.DurableOrchestrationClient) -> None:
        self._client = client

    async def start(self, workflow_input: WorkflowInput) -> None:
        ref = workflow_input.ref
        await self._client.start_new(ORCHESTRATOR_NAME, ref.run_id, workflow_input.model_dump(mode="json"))

    async def state(self, run_id: str) -> WorkflowState | None:
        return await orchestration_state(self._client, run_id, WorkflowProgress)

    async def send_signal(self, run_id: str, name: str, index: int) -> None:
        """Ring signal `index` of `name` (stored first: the ring only says which queue position is there)."""
        await self._client.raise_event(run_id, signal_event(name, index), {"name": name, "index": index})

    async def send_approval(self, run_id: str, approval_id: str) -> None:
        """A gate decision's event (the same as a run's: gates are decided through the run approval routes)."""
        await DurableGateway(self._client).send_approval(run_id, approval_id)

    async def send_cancel(self, instance_id: str, reason: str) -> None:
        """Ask an orchestration (the workflow or a child run) to cancel. Raises as the SDK does when the host refuses
        the event (404 not started yet, 410 finished): `run_lifecycle.cancel` tells those apart."""
        await self._client.raise_event(instance_id, CANCEL_EVENT, {"reason": reason})
