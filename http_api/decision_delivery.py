"""Delivering stored decisions to their run: ring the approval's doorbell, and ring again when a run still waits for
a decision the store has held for a while (the first ring failed, or was lost).

The API stores a decision first, conditionally, so exactly one wins; the event that follows only tells the run which
approval to read (`agent_runs.contracts.approval_event_name`). Ringing twice is harmless: the run applies what the
store holds, once. So a delivery that failed is repaired by ringing again: by the deciding caller repeating the same
request, and by any poll of the run (`redeliver_stalled`). A cancel is stored (flagged) first too, and a run waiting
for a person (or a workflow waiting) whose cancel event failed is told again the same way (`ring_stalled_cancel`).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from http_api.durable_gateway import DurableGateway
from http_api.problems import ApiProblem
from http_api.run_lifecycle import CancelSender
from session_store import ApprovalRecord, RunRecord, SessionStore

log = logging.getLogger(__name__)



async def deliver(gateway: DurableGateway, store: SessionStore, run_id: str, approval_id: str) -> None:
    """Ring the approval's doorbell; on failure the caller gets a 503 telling it to repeat the request, or a 409 when
    the run finished meanwhile."""
    try:
        await gateway.send_approval(run_id, approval_id)
    except Exception as error:
        run = await store.get_run(run_id)
        if run is not None and run.finished:
            # Its orchestration is gone and refuses events (the host's 410): the decision came too late to be
            # applied, and sending it again would not change that.
            raise ApiProblem(
                409, "run_finished", "The run has already finished", f"The run ended {run.status} before the "
                "decision reached it; it was not applied.",
            ) from error
        log.warning("decision %s of run %s is stored but was not delivered: %s", approval_id, run_id, error)
        raise ApiProblem(
            503,
            "decision_not_delivered",
            "The decision is stored but the run has not been told yet",
            "Send the same request again to deliver it; it will not be applied twice.",
            headers={"Retry-After": "1"},
        ) from error


async def redeliver_stalled(
    store: SessionStore,
    gateway: DurableGateway,
    run_id: str,
    waiting_for: list[str],
    *,
    stalled_after: timedelta,
    now: datetime | None = None,
    records: list[ApprovalRecord] | None = None,
) -> list[str]:
    """Ring again for each approval the run still waits for (`waiting_for`, from its custom status) that the store
    shows decided for longer than `stalled_after` (`DECISION_REDELIVERY_SECONDS`). Best effort; returns the approvals
    rung. `records`: the caller read the run's approvals (at least those it waits for) in this request already."""
    if not waiting_for:
        return []
    now = now or datetime.now(UTC)
    if records is None:
        records = await store.list_approvals(run_id=run_id)
    stalled = [
        record.approval_id
        for record in records
        if record.approval_id in waiting_for
        and record.status in ("approved", "rejected")
        and record.decided_at is not None
        and now - record.decided_at > stalled_after
    ]
    for approval_id in stalled:
        try:
            await gateway.send_approval(run_id, approval_id)
            log.info("decision %s of run %s was stalled: delivered again", approval_id, run_id)
        except Exception as error:
            log.warning("decision %s of run %s is still not delivered: %s", approval_id, run_id, error)
    return stalled


async def ring_stalled(
    store: SessionStore,
    gateway: DurableGateway,
    run: RunRecord,
    waiting_for: list[str],
    *,
    stalled_after: timedelta,
    records: list[ApprovalRecord] | None = None,
) -> None:
    """What a poll repairs for a run waiting for approvals (`waiting_for`; `run` as this request read it): its cancel
    (`ring_stalled_cancel`: the run takes no decision once flagged), else its stalled decisions."""
    if not waiting_for:
        return
    now = datetime.now(UTC)
    if await ring_stalled_cancel(gateway, run, stalled_after=stalled_after, now=now):
        return
    await redeliver_stalled(
        store, gateway, run.run_id, waiting_for, stalled_after=stalled_after, now=now, records=records
    )


async def ring_stalled_cancel(
    gateway: CancelSender, run: RunRecord, *, stalled_after: timedelta, now: datetime | None = None
) -> bool:
    """Raise the cancel event again of a run (or workflow) that waits - for a person, a signal, a timer - while its
    cancel has been flagged for longer than `stalled_after` (its event failed: the cancel route answered 503
    `cancel_not_delivered`, and the caller gave up; or it was lost). Whether it was flagged so (the event was tried:
    best effort). Only for what waits: a poll never adds work to a run draining its step in flight. A second cancel
    event is harmless (a cancel is sticky)."""
    flagged = run.flagged_cancel_error if not run.finished else None
    flagged_at = run.cancel_requested_at
    if flagged is None or flagged_at is None or (now or datetime.now(UTC)) - flagged_at <= stalled_after:
        return False
    try:
        await gateway.send_cancel(run.run_id, flagged["message"])
        log.info("cancel of run %s was stalled: delivered again", run.run_id)
    except Exception as error:
        log.warning("cancel of run %s is still not delivered: %s", run.run_id, error)
    return True
