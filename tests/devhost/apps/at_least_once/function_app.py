"""Activities that record every execution in a file, so tests can count deliveries across crashes and restarts."""

import time
from pathlib import Path

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.orchestration_trigger(context_name="context")
def record_chain(context: df.DurableOrchestrationContext):
    args = context.get_input()
    results = []
    for step in range(args["steps"]):
        results.append((yield context.call_activity("record", {"path": args["path"], "step": step})))
    return results


@app.orchestration_trigger(context_name="context")
def record_fan_out(context: df.DurableOrchestrationContext):
    args = context.get_input()
    tasks = [context.call_activity("record", {"path": args["path"], "step": s}) for s in range(args["steps"])]
    return (yield context.task_all(tasks))


@app.activity_trigger(input_name="payload")
def record(payload: dict) -> int:
    with Path(payload["path"]).open("a") as log:
        log.write(f"{payload['step']}\n")
    return payload["step"] * 10


@app.orchestration_trigger(context_name="context")
def gated_once(context: df.DurableOrchestrationContext):
    return (yield context.call_activity("wait_for_gate", context.get_input()))


@app.activity_trigger(input_name="payload")
def wait_for_gate(payload: dict) -> str:
    """Records its start (a line per execution), then waits until its own gate file exists (each call has its
    own gate)."""
    with Path(payload["started"]).open("a") as started:
        started.write("started\n")
    while not Path(payload["gate"]).exists():
        time.sleep(0.01)
    return payload["name"]
