"""Functions that tell which process ran them, to test devhost's worker processes (`workers=N`)."""

import asyncio
import json
import os
from pathlib import Path

import azure.durable_functions as df
import azure.functions as func

# Fails to import in any process but the one named here (used to test a worker that cannot load the app).
_ONLY_PID = os.environ.get("IMPORT_ONLY_IN_PID")
if _ONLY_PID and int(_ONLY_PID) != os.getpid():
    raise RuntimeError("this app refuses to load in a worker process")

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)
RETRY = df.RetryOptions(first_retry_interval_in_milliseconds=1000, max_number_of_attempts=2)


@app.route(route="pid", methods=["GET"])
def pid(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(str(os.getpid()))


@app.route(route="worker-count", methods=["GET"])
def worker_count(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(os.environ.get("FUNCTIONS_WORKER_PROCESS_COUNT", "unset"))


@app.route(route="boom", methods=["GET"])
async def boom(req: func.HttpRequest) -> func.HttpResponse:
    raise RuntimeError("the handler failed")


@app.route(route="echo/{item}", methods=["POST"])
async def echo(req: func.HttpRequest) -> func.HttpResponse:
    body = {
        "method": req.method,
        "item": req.route_params["item"],
        "q": req.params.get("q"),
        "header": req.headers.get("x-custom"),
        "body_hex": req.get_body().hex(),
    }
    response = func.HttpResponse(json.dumps(body), status_code=201, mimetype="application/json")
    response.headers["X-Served-By"] = str(os.getpid())
    return response


@app.route(route="start/{name}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def start(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    instance_id = await client.start_new(req.route_params["name"], client_input=req.get_json())
    return client.create_check_status_response(req, instance_id)


@app.orchestration_trigger(context_name="context")
def fan_out_pids(context: df.DurableOrchestrationContext):
    count = context.get_input()["count"]
    tasks = [context.call_activity("async_pid" if i % 2 else "sync_pid", i) for i in range(count)]
    return (yield context.task_all(tasks))


@app.orchestration_trigger(context_name="context")
def crash_then_retry(context: df.DurableOrchestrationContext):
    return (yield context.call_activity_with_retry("crash_once", RETRY, context.get_input()))


@app.orchestration_trigger(context_name="context")
def failing(context: df.DurableOrchestrationContext):
    try:
        yield context.call_activity("fail", None)
    except Exception as error:
        return str(error)


@app.activity_trigger(input_name="index")
async def async_pid(index: int) -> int:
    await asyncio.sleep(0.05)  # stays in flight, so concurrent calls spread over the workers
    return os.getpid()


@app.activity_trigger(input_name="index")
def sync_pid(index: int) -> int:
    return os.getpid()


@app.activity_trigger(input_name="args")
def crash_once(args: dict) -> dict:
    """Kills its worker process the first time (a marker file remembers), succeeds when retried."""
    marker = Path(args["marker"])
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        os._exit(9)
    return {"crashed_pid": int(marker.read_text()), "retried_pid": os.getpid()}


@app.activity_trigger(input_name="nothing")
def fail(nothing: None) -> None:
    raise ValueError("boom")


@app.orchestration_trigger(context_name="context")
def start_another(context: df.DurableOrchestrationContext):
    """An activity in a worker process starts another orchestration through its Durable client binding."""
    return (yield context.call_activity("start_child", context.get_input()))


@app.activity_trigger(input_name="payload")
@app.durable_client_input(client_name="client")
async def start_child(payload: dict, client: df.DurableOrchestrationClient) -> dict:
    await client.start_new("fan_out_pids", payload["child"], {"count": 2})
    return {"started": payload["child"], "pid": os.getpid()}
