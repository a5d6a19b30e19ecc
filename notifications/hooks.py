"""The run orchestrators' one call after a transition: `yield from notify(context, ...)`. Only runs that started
with notifications configured make it (their input says so), so other runs' histories are unchanged.

Recording never fails a run: the events are recorded only here (the delivery orchestration sends what is recorded),
so a `notify_run` that fails after its activity retries (the store down, a bug) is tried again on a durable timer
(the deliveries' capped backoff: 10 s doubling to an hour), which survives a host kill. Each call records at the
run's own position (`seq`), insert-once by event id, so a retried call records each event once, in the run's order,
and nothing the run does later can be recorded before it: the run goes on (or ends) only once it holds, or once the
call is given up. `bounded` (runs started since: the flag is in their input, so histories from before replay as they
were recorded, retrying forever) gives a call up:
- after the deliveries' own `backoff.STEP_GIVE_UP_AFTER` of failing (the orchestration's clock), with a warning
  (`RECORDING_GIVEN_UP`, the run id) and a note in the run's delivery log (`given_up`, if the store takes it): its
  events are never sent, and the run goes on (or ends);
- when the run is cancelled while it waits (`cancels`: the run's own cancel event, raced with the timer as every
  other wait of the run): the run then ends cancelled through its normal cancel path, which records its final event
  (that call again until the store takes it, or given up as above). The given-up call's approval events are not
  sent: they are about approvals the cancel has closed. Noted too (`why: cancelled`) by runs started since
  (`notify_notes_cancels`: histories from before went on from the cancel without that activity)."""

from __future__ import annotations

import logging
from collections.abc import Generator
from contextlib import suppress
from datetime import datetime, timedelta
from typing import Any, Literal

import azure.durable_functions as df

from notifications.activities import note_recording_given_up, notify_run
from notifications.backoff import gives_up, next_delay
from notifications.contracts import NotificationFlags, NotifyInput, RecordingGivenUp
from orchestrators.external_events import ExternalEvents

RECORDING_GIVEN_UP = "notification_recording_given_up"

log = logging.getLogger(__name__)


def notify(
    context: df.DurableOrchestrationContext,
    flags: NotificationFlags,
    *,
    run_id: str,
    session_id: str,
    agent: str,
    what: Literal["approvals", "finished"],
    seq: int | None = None,
    cancels: ExternalEvents | None = None,
) -> Generator[Any, Any, None]:
    """`flags`: the run's input (`notify`: record at all; `notify_gives_up`: give the call up, see the module;
    `notify_notes_cancels`: note a call given up for a cancel). `seq`: the run's position (deterministic, never
    smaller than at an earlier call): the order of its events. `cancels`: the run's cancel events, raced with each
    wait (only with `notify_gives_up`; a cancel is left for the run to take)."""
    if not flags.notify:
        return
    bounded = flags.notify_gives_up
    step = NotifyInput(run_id=run_id, session_id=session_id, agent=agent, what=what, seq=seq)
    failures = 0
    failing_since: datetime | None = None
    while True:
        task = notify_run.call(context, step)  # outside the try: only the activity's failure is retried
        try:
            yield task
            return
        except Exception as error:  # failed after its retries: wait durably, then record again (idempotent)
            failed = type(error).__name__
        now = context.current_utc_datetime
        failing_since = failing_since or now
        if bounded and gives_up(failing_since, now):
            _given_up(context, run_id, what, f"failing since {failing_since.isoformat()}")
            yield from _note(context, RecordingGivenUp(step=step, failing_since=failing_since))
            return
        if bounded and cancels is not None and cancels.received():  # arrived before this wait, on an older waiter
            yield from _given_up_for_cancel(context, flags, step, failing_since)
            return
        delay = next_delay(failures)
        failures += 1
        if not context.is_replaying:
            log.warning("recording the %s events of run %s failed (%s); again in %.0f s", what, run_id, failed, delay)
        timer = context.create_timer(now + timedelta(seconds=delay))
        if not bounded or cancels is None:
            yield timer
            continue
        cancel = cancels.waiter()
        if (yield context.task_any([timer, cancel])) is cancel:
            timer.cancel()  # an uncancelled timer would keep the instance running until it fires
            yield from _given_up_for_cancel(context, flags, step, failing_since)
            return


def _given_up_for_cancel(
    context: df.DurableOrchestrationContext, flags: NotificationFlags, step: NotifyInput, failing_since: datetime
) -> Generator[Any, Any, None]:
    _given_up(context, step.run_id, step.what, "the run was cancelled")
    if flags.notify_notes_cancels:  # runs started since: histories from before went on without this activity
        yield from _note(context, RecordingGivenUp(step=step, failing_since=failing_since, why="cancelled"))


def _note(context: df.DurableOrchestrationContext, given_up: RecordingGivenUp) -> Generator[Any, Any, None]:
    """For the run's clients to see, if the store takes it now (else the warning; a run's end given up unnoted, its
    idle deliveries end once the run's orchestration has: `notifications.orchestrator`)."""
    with suppress(Exception):
        yield note_recording_given_up.call(context, given_up)


def _given_up(context: df.DurableOrchestrationContext, run_id: str, what: str, why: str) -> None:
    if not context.is_replaying:
        log.warning("%s: the %s events of run %s are not recorded (%s)", RECORDING_GIVEN_UP, what, run_id, why,
                    extra={"code": RECORDING_GIVEN_UP, "run_id": run_id})
