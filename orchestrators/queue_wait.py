"""Waiting in a session's queue, inside the `agent_run` orchestration (deterministic: durable timers, no clocks).

A queued run asks `take_turn` whether the session is its own yet; until it is, it sleeps on a durable timer raced
with `cancel` (the store's cancel flag is what `take_turn` checks, so the event only wakes the run up). Nothing has
to tell it the session was handed over: the finishing run has no Durable client in its activities, so asking on a
timer is what works the same on Azure, `func start` and devhost. After many polls it continues as new, so a long
wait keeps a short history. A store down for a while (`take_turn` failing for good) is waited out the same way.
"""

from __future__ import annotations

from collections.abc import Generator
from datetime import timedelta
from typing import Any

import azure.durable_functions as df

from activities.queue import take_turn
from agent_runs.contracts import RunInput, TurnInput
from agent_runs.wire import compact_json
from durable_steps import OUTAGE_RETRIES
from orchestrators.external_events import ExternalEvents
from orchestrators.failures import is_store_outage

FIRST_DELAY_SECONDS = 1.0
MAX_DELAY_SECONDS = 8.0
POLLS_PER_EXECUTION = 60


def take_turn_if_queued(
    context: df.DurableOrchestrationContext, run_input: RunInput, cancels: ExternalEvents
) -> Generator[Any, Any, RunInput | None]:
    """The input to run with once the session is this run's; None when the orchestration is done for now (the run
    was cancelled while it waited, or it continued as new to keep waiting)."""
    if not run_input.queued:
        return run_input
    failures = 0  # in a row: the store down (`take_turn` failed for good), asked again after `OUTAGE_RETRIES`
    for poll in range(POLLS_PER_EXECUTION):
        try:
            result = yield from take_turn.run(context, TurnInput(run=run_input.run))
        except Exception as error:
            # Crashing in an outage would leave the run queued for good: the session, handed to it later, held by a
            # run that never runs. After about an hour of it, or at once for a bug, it crashes (a poll closes it).
            if failures == len(OUTAGE_RETRIES) or not is_store_outage(error):
                raise
            delay = OUTAGE_RETRIES[failures]
            failures += 1
        else:
            if result.cancelled:
                return None
            if result.ordinal is not None:
                run = run_input.run.model_copy(update={"ordinal": result.ordinal})
                return run_input.model_copy(update={"run": run, "next_position": result.input_count, "queued": False})
            failures = 0
            delay = timedelta(seconds=min(FIRST_DELAY_SECONDS * 2**poll, MAX_DELAY_SECONDS))
        cancels.take()  # a cancel wakes the run up; `take_turn` reads the cancel flag the API stored before it
        timer = context.create_timer(context.current_utc_datetime + delay)
        winner = yield context.task_any([timer, cancels.waiter()])
        if winner is not timer:
            timer.cancel()
    context.continue_as_new(compact_json(run_input))
    return None
