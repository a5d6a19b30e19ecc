"""The run orchestrators' one call after a transition: `yield from notify(context, ...)`. Only runs that started
with notifications configured make it (their input says so), so other runs' histories are unchanged.

Recording never fails a run, and is never given up: the events are recorded only here (the delivery orchestration
sends what is recorded), so a call given up would lose them for good, the run's final event most of all (nothing is
recorded after it: its receivers never heard the run ended). A `notify_run` that fails after its activity retries
(the store down, a bug) is tried again on a durable timer (the deliveries' capped backoff: 10 s doubling to an hour),
so it survives a host kill, until it is recorded; only then does the run go on (or end). Each call records at the
run's own position (`seq`), insert-once by event id, so a retried call records each event once, in the run's order,
and nothing the run does later can be recorded before it."""

from __future__ import annotations

import logging
from collections.abc import Generator
from datetime import timedelta
from typing import Any, Literal

import azure.durable_functions as df

from notifications.activities import notify_run
from notifications.backoff import next_delay
from notifications.contracts import NotifyInput

log = logging.getLogger(__name__)


def notify(
    context: df.DurableOrchestrationContext,
    enabled: bool,
    *,
    run_id: str,
    session_id: str,
    agent: str,
    what: Literal["approvals", "finished"],
    seq: int | None = None,
) -> Generator[Any, Any, None]:
    """`seq`: the run's position (deterministic, never smaller than at an earlier call): the order of its events."""
    if not enabled:
        return
    step = NotifyInput(run_id=run_id, session_id=session_id, agent=agent, what=what, seq=seq)
    failures = 0
    while True:
        task = notify_run.call(context, step)  # outside the try: only the activity's failure is retried
        try:
            yield task
            return
        except Exception as error:  # failed after its retries: wait durably, then record again (idempotent)
            delay = next_delay(failures)
            failures += 1
            if not context.is_replaying:
                log.warning("recording the %s events of run %s failed (%s); again in %.0f s", what, run_id,
                            type(error).__name__, delay)
            yield context.create_timer(context.current_utc_datetime + timedelta(seconds=delay))
