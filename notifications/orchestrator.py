"""`notification_delivery`: the deliveries of one subscription for one run, in order, each retried with durable
timers (exponential backoff or the receiver's `Retry-After`) until delivered, given up after the configured attempts,
or the receiver answers 410. It sleeps on a wake-up event while nothing is pending and ends once the run's final event
is delivered, or once nothing is pending after the run ended (and its end's event, if wanted, was recorded:
`activities.idle`). A redelivery runs it for its one entry.

When the delivery step itself keeps failing (the activity raises: the store is down, a bug), it is retried on the same
capped backoff for `STEP_GIVE_UP_AFTER`, then its event is given up (kept in the log, redeliverable) and the next one
goes; if even that cannot be recorded the orchestration ends, its events still pending in the store (the run's next
event starts it again). Deterministic: only its input, its own clock and the activities' results are read."""

from __future__ import annotations

from collections.abc import Generator
from datetime import datetime, timedelta
from typing import Any

import azure.durable_functions as df

from notifications.activities import deliver_next, give_up_next
from notifications.backoff import gives_up, next_delay
from notifications.contracts import STEPS_PER_EXECUTION, WAKE_EVENT, DeliveryInput, DeliveryStep


def notification_delivery(context: df.DurableOrchestrationContext) -> Generator[Any, Any, dict[str, Any]]:
    state = DeliveryInput.model_validate(context.get_input())
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
        yield context.wait_for_external_event(WAKE_EVENT)  # idle: the next notify_run wakes it
    context.continue_as_new(state.model_dump(mode="json"))
    return {}


def failing(state: DeliveryInput, context: df.DurableOrchestrationContext) -> tuple[DeliveryInput, datetime]:
    """One more failure of the step itself, and since when it has been failing (the orchestration's own time)."""
    since = state.failing_since or context.current_utc_datetime
    return state.model_copy(update={"failures": state.failures + 1, "failing_since": since}), since


def wait(context: df.DurableOrchestrationContext, seconds: float) -> Any:
    return context.create_timer(context.current_utc_datetime + timedelta(seconds=seconds))
