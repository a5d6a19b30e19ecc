"""The API's view of Durable Functions: start a run, read its progress, send it approvals and cancels.

A thin wrapper over the SDK's `DurableOrchestrationClient` so handlers speak in run terms and the event names and
payload shapes live in one place (`agent_runs.contracts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import azure.durable_functions as df
from pydantic import BaseModel, ValidationError

from agent_runs.contracts import (
    CANCEL_EVENT,
    ORCHESTRATOR_NAME,
    ApprovalEvent,
    CancelEvent,
    RunInput,
    RunProgress,
    approval_event_name,
)
from agent_runs.wire import compact_json

ProgressT = TypeVar("ProgressT", bound=BaseModel)


@dataclass(frozen=True)
class OrchestrationState(Generic[ProgressT]):
    runtime_status: str  # Pending, Running, Completed, Failed, Terminated, Suspended, ContinuedAsNew
    progress: ProgressT | None  # the custom status, when it is one of ours
    output: Any


# Runtime statuses of an orchestration that has not ended (it may still close its run).
STILL_RUNNING = frozenset({"Pending", "Running", "ContinuedAsNew", "Suspended"})

# The state of an orchestration `start_new` has just created, before its first episode: what reading it back at once
# gives (runtime status Pending, no custom status, no output).
JUST_CREATED: OrchestrationState[Any] = OrchestrationState("Pending", None, None)


async def orchestration_state(
    client: df.DurableOrchestrationClient, instance_id: str, progress_type: type[ProgressT]
) -> OrchestrationState[ProgressT] | None:
    """The instance's runtime status, its custom status read as `progress_type`, and its output; None if unknown."""
    status = await client.get_status(instance_id)
    if not status or status.runtime_status is None:
        return None
    progress = None
    if isinstance(status.custom_status, dict):
        try:
            progress = progress_type.model_validate(status.custom_status)
        except ValidationError:
            progress = None
    return OrchestrationState(status.runtime_status.value, progress, status.output)


class DurableGateway:
    def __init__(self, client: df.DurableOrchestrationClient) -> None:
        self._client = client

    async def start_run(self, run_input: RunInput) -> None:
        await self._client.start_new(ORCHESTRATOR_NAME, run_input.run.run_id, compact_json(run_input))

    async def state(self, run_id: str) -> OrchestrationState[RunProgress] | None:
        return await orchestration_state(self._client, run_id, RunProgress)

    async def send_approval(self, run_id: str, approval_id: str) -> None:
        await self._client.raise_event(
            run_id, approval_event_name(approval_id), ApprovalEvent(approval_id=approval_id).model_dump()
        )

    async def send_cancel(self, run_id: str, reason: str | None) -> None:
        await self._client.raise_event(run_id, CANCEL_EVENT, CancelEvent(reason=reason).model_dump())
