"""Durable functions registered on a blueprint (the app object is a plain func.FunctionApp)."""

import azure.durable_functions as df

bp = df.Blueprint()


@bp.orchestration_trigger(context_name="context")
def greet_all(context: df.DurableOrchestrationContext):
    names = context.get_input()
    greetings = yield context.task_all([context.call_activity("greet", n) for n in names])
    return greetings


@bp.activity_trigger(input_name="name")
async def greet(name: str) -> str:
    return f"Hi {name}"
