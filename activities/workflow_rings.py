"""`ring_workflow`: a child run of a fail-fast parallel step that failed tells its workflow at once (the step then
cancels the other branches instead of waiting for them: `orchestrators.workflow_waits`). A run whose orchestration
crashed is first closed `failed` (`run_crashed`), as its view would close it once the orchestration has failed: the
step reads its children's records, and the crashed one's would still say it runs."""

from __future__ import annotations

import logging

import azure.durable_functions as df
from pydantic import BaseModel, ConfigDict, Field

from agent_runs.closing import close_if_crashed
from agent_runs.services import RunServices
from notifications.client_activity import client_activity
from workflow_runtime.contracts import child_failed_event

log = logging.getLogger(__name__)


class ChildFailed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workflow_run_id: str
    run_id: str
    crash: str | None = Field(default=None, exclude_if=lambda crash: crash is None)
    """The run's orchestration crashed with this error (its first line, for the log): close the run first."""


class Rung(BaseModel):
    delivered: bool


@client_activity()
async def ring_workflow(child: ChildFailed, client: df.DurableOrchestrationClient) -> Rung:
    if child.crash is not None:  # a store that fails here fails the ring: the step waits, as it did for a crash
        store = RunServices.current().store
        run = await store.get_run(child.run_id)
        if run is not None:
            await close_if_crashed(store, run, "Failed", child.crash)
    try:
        await client.raise_event(child.workflow_run_id, child_failed_event(child.run_id), {})
    except Exception as error:  # the workflow ended meanwhile: nobody waits for the ring any more
        log.info("workflow %s not rung for its child run %s: %s", child.workflow_run_id, child.run_id, error)
        return Rung(delivered=False)
    return Rung(delivered=True)
