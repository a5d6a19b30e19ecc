"""`notification_delivery`: the deliveries of one subscription for one run, in order, each retried with durable
timers (exponential backoff or the receiver's `Retry-After`) until delivered, given up after the configured attempts,
or the receiver answers 410. It sleeps on a wake-up event while nothing is pending and ends once the run's final event
is delivered, or once nothing is pending after the run ended (and its end's event, if wanted, was recorded:
`activities.idle`). A redelivery runs it for its one entry. Idle, it also looks again every `STEP_GIVE_UP_AFTER`
(hourly once the run has ended without its end's event): a run whose end's recording was given up, the note of that
refused too, wakes nobody, so it ends once the run's orchestration, the only recorder of that event, has ended
(`activities.end_unrecordable`), with a warning (`END_NEVER_RECORDED`).

When the delivery step itself keeps failing (the activity raises: the store is down, a bug), it is retried on the same
capped backoff for `STEP_GIVE_UP_AFTER`, then its event is given up (kept in the log, redeliverable) and the next one
goes; if even that cannot be recorded the orchestration ends, its events still pending in the store (the run's next
event starts it again). Deterministic: only its input, its own clock and the activities' results are read."""

from __future__ import annotations

import logging
from collections.abc import Generator
from datetime import datetime, timedelta
from typing import Any

import azure.durable_functions as df

from notifications.activities import deliver_next, end_unrecordable, give_up_next
from notifications.backoff import gives_up, next_delay
from notifications.contracts import STEPS_PER_EXECUTION, WAKE_EVENT, DeliveryInput, DeliveryStep
from orchestrators.external_events import ExternalEvents

END_NEVER_RECORDED = "notification_end_never_recorded"

log = logging.getLogger(__name__)


def notification_delivery(context: df.DurableOrchestrationContext) -> Generator[Any, Any, dict[str, Any]]:
    state = DeliveryInput.model_validate(context.get_input())
    wakes = ExternalEvents(context, WAKE_EVENT)
    for _ in range(STEPS_PER_EXECUTION):
        try:
            step: DeliveryStep = yield from deliver_next.run(context, state)
        except Exception:  # the activity failed after its retries: not the receiver, the step itself
            state, since = failing(state, context)
            if not gives_up(since, context.current_utc_datetime):
                yield wait(context, next_delay(state.failures - 1))
                continue
            try:
                step = yield from give_up_next.run(context, state)
            except Exception:  # nothing can be recorded: end; the events stay pending in the store
                return {"outcome": "gave_up"}
        state = state.model_copy(update={"failures": 0, "failing_since": None})
        if step.outcome == "stop":
            return {"outcome": "stopped"}
        if step.outcome in ("delivered", "abandoned"):
            state = state.model_copy(update={"attempt": 0})
            if step.final:
                return {"outcome": "finished"}
            continue
        if step.outcome == "retry":
            state = state.model_copy(update={"attempt": state.attempt + 1})
            yield wait(context, step.retry_in_seconds or next_delay(state.attempt))
            continue
        if step.final:  # idle, and the run has ended: nothing more will be recorded
            return {"outcome": "finished"}
        if step.end_missing and (yield from unrecordable(context, state)):
            if not context.is_replaying:
                log.warning("%s: run %s ended without its end's event recorded or noted; delivery %s ends",
                            END_NEVER_RECORDED, state.run_id, context.instance_id,
                            extra={"code": END_NEVER_RECORDED, "run_id": state.run_id})
            return {"outcome": "end_never_recorded"}
        if wakes.take() is None:  # else woken while it was busy (on a waiter of an earlier wait): look again now
            yield from sleep(context, wakes, step.recheck_in_seconds)
    context.continue_as_new(state.model_dump(mode="json"))
    return {}


def sleep(context: df.DurableOrchestrationContext, wakes: ExternalEvents, recheck_in_seconds: float | None) -> Any:
    """Idle: until the next notify_run wakes it or, when the step said so (steps of older code did not: their
    histories replay as recorded), until it is time to look again."""
    wake = wakes.waiter()
    if recheck_in_seconds is None:
        yield wake
    else:
        timer = wait(context, recheck_in_seconds)
        if (yield context.task_any([wake, timer])) is not wake:
            return
        timer.cancel()  # an uncancelled timer would keep the instance running until it fires
    wakes.take()


def unrecordable(context: df.DurableOrchestrationContext, state: DeliveryInput) -> Any:
    """Whether nothing can record the run's end's event any more (`activities.end_unrecordable`); not known (the
    activity failed): not yet, it is looked at again."""
    try:
        return (yield from end_unrecordable.run(context, state))
    except Exception:
        return False


def failing(state: DeliveryInput, context: df.DurableOrchestrationContext) -> tuple[DeliveryInput, datetime]:
    """One more failure of the step itself, and since when it has been failing (the orchestration's own time)."""
    since = state.failing_since or context.current_utc_datetime
    return state.model_copy(update={"failures": state.failures + 1, "failing_since": since}), since


def wait(context: df.DurableOrchestrationContext, seconds: float) -> Any:
    return context.create_timer(context.current_utc_datetime + timedelta(seconds=seconds))
