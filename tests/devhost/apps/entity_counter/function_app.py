"""Entity counter: function-based entity plus orchestrations that call and signal it."""

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)


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
