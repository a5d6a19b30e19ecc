"""`ring_workflow`: a child run of a fail-fast parallel step that failed tells its workflow at once (the step then
cancels the other branches instead of waiting for them: `orchestrators.workflow_waits`)."""

from __future__ import annotations

import logging

import azure.durable_functions as df
from pydantic import BaseModel, ConfigDict

from notifications.client_activity import client_activity
from workflow_runtime.contracts import child_failed_event

log = logging.getLogger(__name__)


class ChildFailed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workflow_run_id: str
    run_id: str


class Rung(BaseModel):
    delivered: bool


@client_activity()
async def ring_workflow(child: ChildFailed, client: df.DurableOrchestrationClient) -> Rung:
    try:
        await client.raise_event(child.workflow_run_id, child_failed_event(child.run_id), {})
    except Exception as error:  # the workflow ended meanwhile: nobody waits for the ring any more
        log.info("workflow %s not rung for its child run %s: %s", child.workflow_run_id, child.run_id, error)
        return Rung(delivered=False)
    return Rung(delivered=True)
