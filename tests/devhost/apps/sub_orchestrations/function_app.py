"""Sub-orchestrations: explicit and automatic child ids, nesting, failure propagation."""

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.orchestration_trigger(context_name="context")
def parent(context: df.DurableOrchestrationContext):
    explicit = yield context.call_sub_orchestrator("child", {"n": 2}, f"{context.instance_id}-child")
    auto = yield context.call_sub_orchestrator("child", {"n": 3})
    nested = yield context.call_sub_orchestrator("middle", 4)
    try:
        yield context.call_sub_orchestrator("failing_child", "z")
        failure = None
    except Exception as exc:
        failure = str(exc)
    return {"explicit": explicit, "auto": auto, "nested": nested, "failure": failure}


@app.orchestration_trigger(context_name="context")
def middle(context: df.DurableOrchestrationContext):
    value = yield context.call_sub_orchestrator("child", {"n": context.get_input()})
    return {"middle": value}


@app.orchestration_trigger(context_name="context")
def child(context: df.DurableOrchestrationContext):
    n = context.get_input()["n"]
    doubled = yield context.call_activity("double", n)
    return {"n": n, "doubled": doubled, "parent": context.parent_instance_id, "me": context.instance_id}


@app.orchestration_trigger(context_name="context")
def failing_child(context: df.DurableOrchestrationContext):
    yield context.call_activity("double", 1)
    raise ValueError(f"child failed with {context.get_input()}")


@app.activity_trigger(input_name="n")
def double(n: int) -> int:
    return 2 * n
