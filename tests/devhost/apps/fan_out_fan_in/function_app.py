"""Fan-out/fan-in: N parallel activities, summed; a failing branch; custom status."""

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.orchestration_trigger(context_name="context")
def fan_out_fan_in(context: df.DurableOrchestrationContext):
    count = (context.get_input() or {}).get("count", 5)
    context.set_custom_status({"phase": "fan-out", "count": count})
    results = yield context.task_all([context.call_activity("square", i) for i in range(count)])
    context.set_custom_status({"phase": "done"})
    return {"results": results, "sum": sum(results)}


@app.orchestration_trigger(context_name="context")
def fan_out_with_failure(context: df.DurableOrchestrationContext):
    tasks = [context.call_activity("square", 1), context.call_activity("boom", "x"), context.call_activity("square", 2)]
    try:
        yield context.task_all(tasks)
    except Exception as exc:
        greeting = yield context.call_activity("square", 10)
        return {"caught": str(exc).split(" \n ")[0], "after": greeting}
    return "not reached"


@app.orchestration_trigger(context_name="context")
def fan_out_uncaught(context: df.DurableOrchestrationContext):
    yield context.task_all([context.call_activity("boom", "y"), context.call_activity("square", 3)])
    return "not reached"


@app.activity_trigger(input_name="n")
def square(n: int) -> int:
    return n * n


@app.activity_trigger(input_name="tag")
def boom(tag: str) -> None:
    raise ValueError(f"boom {tag}")
