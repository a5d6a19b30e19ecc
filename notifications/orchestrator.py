"""`notification_delivery`: the deliveries of one subscription for one run, in order, each retried with durable
timers (exponential backoff or the receiver's `Retry-After`) until delivered, given up after the configured attempts,
or the receiver answers 410. It sleeps on a wake-up event while nothing is pending and ends once the run's final event
is delivered, or once nothing is pending after the run ended. Deterministic: only its input and the activity's
results are read."""

from __future__ import annotations

from collections.abc import Generator
from datetime import timedelta
from typing import Any

import azure.durable_functions as df

from notifications.activities import deliver_next
from notifications.backoff import next_delay
from notifications.contracts import STEPS_PER_EXECUTION, WAKE_EVENT, DeliveryInput, DeliveryStep


def notification_delivery(context: df.DurableOrchestrationContext) -> Generator[Any, Any, dict[str, Any]]:
    state = DeliveryInput.model_validate(context.get_input())
    for _ in range(STEPS_PER_EXECUTION):
        try:
            step: DeliveryStep = yield from deliver_next.run(context, state)
        except Exception:  # the activity failed after its retries (the store was down): try again later
            step = DeliveryStep(outcome="retry", retry_in_seconds=next_delay(state.attempt))
        if step.outcome == "stop":
            return {"outcome": "stopped"}
        if step.outcome in ("delivered", "abandoned"):
            state = state.model_copy(update={"attempt": 0})
            if step.final:
                return {"outcome": "finished"}
            continue
        if step.outcome == "retry":
            state = state.model_copy(update={"attempt": state.attempt + 1})
            delay = step.retry_in_seconds or next_delay(state.attempt)
            yield context.create_timer(context.current_utc_datetime + timedelta(seconds=delay))
            continue
        if step.final:  # idle, and the run has ended: nothing more will be recorded
            return {"outcome": "finished"}
        yield context.wait_for_external_event(WAKE_EVENT)  # idle: the next notify_run wakes it
    context.continue_as_new(state.model_dump())
    return {}
