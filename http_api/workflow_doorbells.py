"""Ring again what a waiting workflow has not heard (the reconcile path of its events).

The API stores a gate decision or a signal before raising its event; if the raise fails (the API process dies in
between, the host refuses it) the workflow would wait for nothing: a gate until its deadline, a signal until the
next signal of its name. A poll that finds the workflow waiting for something the store already holds raises that
event again. A second ring is harmless: every gate level and every signal has an event name of its own, consumed
once (a ring nobody waits for any more stays deferred under a name never waited on again). A workflow that waits
while its cancel has been flagged for a while is rung its cancel instead (`decision_delivery.ring_stalled_cancel`).
Polls and streams of the workflow both repair so (`repair_waiting`).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from http_api.decision_delivery import ring_stalled_cancel
from http_api.workflow_gateway import WorkflowGateway
from session_store import RunRecord, SessionStore
from workflow_runtime.contracts import WorkflowProgress, control_session_id

log = logging.getLogger(__name__)


async def _ring_again(store: SessionStore, gateway: WorkflowGateway, run_id: str, progress: WorkflowProgress) -> None:
    waiting = progress.waiting
    if waiting is None:
        return
    try:
        if progress.status == "requires_action" and waiting.approval_id is not None:
            approval = await store.get_approval(waiting.approval_id)
            if approval is not None and approval.status in ("approved", "rejected"):
                await gateway.send_approval(run_id, approval.approval_id)
        elif waiting.signal is not None and waiting.signal_index is not None:
            queued = await store.list_signals(
                control_session_id(run_id), waiting.signal, from_index=waiting.signal_index, limit=1
            )
            if queued and queued[0].index == waiting.signal_index:
                await gateway.send_signal(run_id, waiting.signal, waiting.signal_index)
    except Exception as error:  # a poll answers whatever happens here; the next poll tries again
        log.warning("could not ring workflow %s again: %s", run_id, error)


async def repair_waiting(
    store: SessionStore, gateway: WorkflowGateway, record: RunRecord, progress: WorkflowProgress,
    *, stalled_after: timedelta,
) -> None:
    """What a look at an open workflow (`record` as this look read it) repairs while it waits: its cancel flagged
    `stalled_after` ago and not heard (the signals it waits for no longer matter), else what it waits for."""
    if progress.waiting is None:
        return
    if await ring_stalled_cancel(gateway, record, stalled_after=stalled_after):
        return
    await _ring_again(store, gateway, record.run_id, progress)
