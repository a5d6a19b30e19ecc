"""Human interaction: an approval event raced with a durable timer (both outcomes), plus event-buffer probes."""

from datetime import timedelta

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.orchestration_trigger(context_name="context")
def approval(context: df.DurableOrchestrationContext):
    timeout_s = (context.get_input() or {}).get("timeout_s", 3 * 86400)
    cancel_timer = (context.get_input() or {}).get("cancel_timer", True)
    deadline = context.current_utc_datetime + timedelta(seconds=timeout_s)
    timer = context.create_timer(deadline)
    event = context.wait_for_external_event("Approval")
    context.set_custom_status("waiting")
    winner = yield context.task_any([event, timer])
    if winner == event:
        if cancel_timer:
            timer.cancel()
        context.set_custom_status("approved")
        return {"approved": event.result}
    context.set_custom_status("timed out")
    return {"approved": None, "timed_out": True}


@app.orchestration_trigger(context_name="context")
def collect_events(context: df.DurableOrchestrationContext):
    """Waits for three 'Item' events one after the other (FIFO buffering) and returns them."""
    items = []
    for _ in range(3):
        items.append((yield context.wait_for_external_event("Item")))
    return items


@app.orchestration_trigger(context_name="context")
def two_waiters(context: df.DurableOrchestrationContext):
    """Two concurrent waits on the same event name: C# waiters are a stack (LIFO)."""
    first = context.wait_for_external_event("Go")
    second = context.wait_for_external_event("Go")
    done = yield context.task_any([first, second])
    return {"first_won": done == first, "value": done.result}


@app.orchestration_trigger(context_name="context")
def deferred_events(context: df.DurableOrchestrationContext):
    """Busy on a timer (no waiter open) while events arrive, then waits twice for the same name: what the Python
    SDK does with events that arrived while no waiter of their name was open (docs/durable-protocol.md §5)."""
    yield context.create_timer(context.current_utc_datetime + timedelta(hours=1))
    first = yield context.wait_for_external_event("Item")
    second = yield context.wait_for_external_event("Item")
    return {"first": first, "second": second}


@app.orchestration_trigger(context_name="context")
def distinct_names(context: df.DurableOrchestrationContext):
    """The same, with one event name per expected event: nothing is lost or replayed."""
    yield context.create_timer(context.current_utc_datetime + timedelta(hours=1))
    first = yield context.wait_for_external_event("Item:1")
    second = yield context.wait_for_external_event("Item:2")
    return {"first": first, "second": second}
