"""Removing a session's runs from Durable: stop an active run for good, purge the history of finished ones.

Durable keeps every orchestration's history (inputs, outputs, events) until it is purged; deleting a session must
not leave its conversation behind there. Only instances in a terminal state can be purged (as on Azure Storage).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from datetime import UTC, datetime

import azure.durable_functions as df

from agent_runs.closing import close_abandoned_run
from session_store import RunRecord, SessionStore

log = logging.getLogger(__name__)
TERMINAL = frozenset({"Completed", "Failed", "Terminated", "Canceled"})
STOP_WAIT_SECONDS = 30.0


async def stop_run(store: SessionStore, client: df.DurableOrchestrationClient, run: RunRecord) -> None:
    """Terminate the run's orchestration (no graceful cancel: its session is going away), wait until Durable says
    it ended, and close the run in the store (calls answered, approvals expired, session released)."""
    instance_id = run.instance_id or run.run_id
    await store.update_run(run.run_id, cancel_requested_at=datetime.now(UTC))
    status = await client.get_status(instance_id)
    if status and status.runtime_status is not None and status.runtime_status.value not in TERMINAL:
        await client.terminate(instance_id, "the session was deleted")
        await _until_terminal(client, instance_id)
    await close_abandoned_run(store, run, "cancelled", {"code": "session_deleted", "message": "session deleted"})


async def discard_instance(client: df.DurableOrchestrationClient, instance_id: str) -> None:
    """Stop the orchestration if it runs, and purge its history: for one started after its run was deleted."""
    status = await client.get_status(instance_id)
    if status and status.runtime_status is not None and status.runtime_status.value not in TERMINAL:
        await client.terminate(instance_id, "its run was deleted")
        await _until_terminal(client, instance_id)
    await purge_histories(client, [instance_id])


async def _until_terminal(client: df.DurableOrchestrationClient, instance_id: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STOP_WAIT_SECONDS
    delay = 0.01
    while loop.time() < deadline:
        status = await client.get_status(instance_id)
        if not status or status.runtime_status is None or status.runtime_status.value in TERMINAL:
            return
        await asyncio.sleep(delay)  # the engine applies the terminate on its own schedule: no event to await here
        delay = min(delay * 2, 0.5)
    log.warning("orchestration %s did not end within %ss of its terminate", instance_id, STOP_WAIT_SECONDS)


async def purge_histories(client: df.DurableOrchestrationClient, instance_ids: Iterable[str]) -> int:
    """Purge each finished instance's history; returns how many were purged (unknown ids count as none)."""
    purged = 0
    for instance_id in instance_ids:
        result = await client.purge_instance_history(instance_id)
        purged += int(getattr(result, "instances_deleted", 0) or 0)
    return purged
