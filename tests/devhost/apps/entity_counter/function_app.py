"""Entity counter: function-based entity plus orchestrations that call and signal it."""

import threading
from datetime import timedelta

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)
slow_release = threading.Event()
flaky_calls = {"n": 0}


@app.entity_trigger(context_name="context")
def Counter(context: df.DurableEntityContext):
    value = context.get_state(lambda: 0)
    op = context.operation_name
    if op == "add":
        value += context.get_input()
        context.set_state(value)
    elif op == "add_then_fail":
        context.set_state(value + context.get_input())
        raise ValueError("boom after set_state")
    elif op == "fail":
        raise ValueError("plain failure")
    elif op == "reset":
        context.set_state(0)
    elif op == "get":
        context.set_result(value)
    elif op == "whoami":
        context.set_result({"name": context.entity_name, "key": context.entity_key})
    elif op == "delete":
        context.destruct_on_exit()
    elif op == "flaky_once":
        flaky_calls["n"] += 1
        # an unserialisable result makes the whole function invocation throw: an internal error, batch retried
        context.set_result(object() if flaky_calls["n"] == 1 else "recovered")
    elif op == "slow":
        slow_release.wait(timeout=10)  # blocks a worker thread, like an agent entity waiting for its model
        context.set_result("slow done")


@app.orchestration_trigger(context_name="context")
def counter_orch(context: df.DurableOrchestrationContext):
    entity = df.EntityId("Counter", context.get_input() or "k1")
    context.signal_entity(entity, "add", 5)
    value = yield context.call_entity(entity, "get")
    try:
        yield context.call_entity(entity, "fail")
        error = None
    except Exception as exc:
        error = str(exc)
    return {"value": value, "error": error}


@app.orchestration_trigger(context_name="context")
def unknown_entity_signal(context: df.DurableOrchestrationContext):
    context.signal_entity(df.EntityId("Nope", "k"), "add", 1)
    yield context.call_activity("noop", None)
    return "not reached"


@app.activity_trigger(input_name="x")
def noop(x):
    return x


@app.orchestration_trigger(context_name="context")
def yielded_signal(context: df.DurableOrchestrationContext):
    """Yielding signal_entity's result emits the action twice and never completes (a documented SDK quirk)."""
    yield context.signal_entity(df.EntityId("Counter", "ys"), "add", 1)
    return "not reached"


@app.orchestration_trigger(context_name="context")
def call_or_timeout(context: df.DurableOrchestrationContext):
    call = context.call_entity(df.EntityId("Counter", "slow"), "slow")
    timer = context.create_timer(context.current_utc_datetime + timedelta(minutes=1))
    winner = yield context.task_any([call, timer])
    if winner == timer:
        return "timed out"
    timer.cancel()
    return winner.result


@app.orchestration_trigger(context_name="context")
def slow_call(context: df.DurableOrchestrationContext):
    return (yield context.call_entity(df.EntityId("Counter", "slow"), "slow"))
