"""An app for devhost's host.json tests: functions that run long, count how many of them run at once, hang or crash.

The gate functions make concurrency observable without timing: every `held` activity counts itself in and waits on
the gate; `GET /api/running?atLeast=N&within=S` answers as soon as N are running (or after S seconds with the count),
`POST /api/gate` opens the gate, `GET /api/peak` tells the most that ever ran together.
"""

import asyncio
import json
import os
import threading
from datetime import timedelta

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)

_state = threading.Condition()
_counts = {"running": 0, "peak": 0, "orchestrator_calls": 0, "failing_calls": 0}
_gate = threading.Event()


def as_json(value, status: int = 200) -> func.HttpResponse:
    return func.HttpResponse(json.dumps(value), status_code=status, mimetype="application/json")


# ----- functionTimeout -----


@app.activity_trigger(input_name="seconds")
def sleepy(seconds: float) -> str:
    threading.Event().wait(seconds)  # blocks (no CPU) past the host's functionTimeout
    return "woke up"


@app.orchestration_trigger(context_name="context")
def call_sleepy(context: df.DurableOrchestrationContext):
    try:
        return (yield context.call_activity("sleepy", context.get_input()))
    except Exception as exc:  # the timed-out activity is a failed task to the orchestrator
        return f"caught: {exc}"


@app.route(route="slow", methods=["GET"])
def slow(req: func.HttpRequest) -> func.HttpResponse:
    threading.Event().wait(float(req.params.get("seconds", "3")))
    return func.HttpResponse("finally")


# ----- concurrency -----


@app.activity_trigger(input_name="n")
def held(n: int) -> int:
    with _state:
        _counts["running"] += 1
        _counts["peak"] = max(_counts["peak"], _counts["running"])
        _state.notify_all()
    _gate.wait(30)
    with _state:
        _counts["running"] -= 1
    return n


@app.orchestration_trigger(context_name="context")
def fan_out_held(context: df.DurableOrchestrationContext):
    results = yield context.task_all([context.call_activity("held", i) for i in range(context.get_input())])
    return sum(results)


@app.route(route="running", methods=["GET"])
async def running(req: func.HttpRequest) -> func.HttpResponse:
    wanted, within = int(req.params["atLeast"]), float(req.params.get("within", "10"))

    def wait() -> int:
        with _state:
            _state.wait_for(lambda: _counts["running"] >= wanted, timeout=within)
            return _counts["running"]

    return as_json({"running": await asyncio.to_thread(wait)})


@app.route(route="gate", methods=["POST"])
async def open_gate(req: func.HttpRequest) -> func.HttpResponse:
    _gate.set()
    return as_json({"open": True})


@app.route(route="peak", methods=["GET"])
async def peak(req: func.HttpRequest) -> func.HttpResponse:
    return as_json({"peak": _counts["peak"]})


# ----- long timers (storage provider payload) -----


@app.orchestration_trigger(context_name="context")
def wait_days(context: df.DurableOrchestrationContext):
    days = context.get_input()
    yield context.create_timer(context.current_utc_datetime + timedelta(days=days))
    return f"waited {days} days"


# ----- a user-code hang or crash in an orchestrator -----


@app.orchestration_trigger(context_name="context")
def hangs_once(context: df.DurableOrchestrationContext):
    """The first episode ever hangs past functionTimeout; the retried one completes."""
    with _state:
        _counts["orchestrator_calls"] += 1
        first = _counts["orchestrator_calls"] == 1
    if first:
        threading.Event().wait(float(os.environ.get("HANG_SECONDS", "3")))
    result = yield context.call_activity("echo", "after the hang")
    return result


@app.orchestration_trigger(context_name="context")
def loops_forever(context: df.DurableOrchestrationContext):
    while True:  # user code that never returns: only a worker process restart stops it
        pass
    yield context.call_activity("echo", "never")


@app.orchestration_trigger(context_name="context")
def exits_process(context: df.DurableOrchestrationContext):
    os._exit(13)  # kills whatever process runs the orchestrator
    yield context.call_activity("echo", "never")


@app.activity_trigger(input_name="text")
def echo(text: str) -> str:
    return text


@app.orchestration_trigger(context_name="context")
def hello(context: df.DurableOrchestrationContext):
    return (yield context.call_activity("echo", "hello"))


@app.route(route="ping", methods=["GET"])
def ping(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("pong")


# ----- host.json retry: not applied to HTTP or Durable triggers -----


def _count_failing_call() -> None:
    with _state:
        _counts["failing_calls"] += 1
    raise RuntimeError("always fails")


@app.route(route="failing", methods=["POST"])
def failing_http(req: func.HttpRequest) -> func.HttpResponse:
    _count_failing_call()
    return func.HttpResponse("unreachable")


@app.activity_trigger(input_name="text")
def failing_activity(text: str) -> str:
    _count_failing_call()
    return text


@app.orchestration_trigger(context_name="context")
def call_failing(context: df.DurableOrchestrationContext):
    try:
        yield context.call_activity("failing_activity", "x")
    except Exception:
        return "failed once"


@app.route(route="failing", methods=["GET"])
async def failing_calls(req: func.HttpRequest) -> func.HttpResponse:
    return as_json({"calls": _counts["failing_calls"]})


# ----- function keys (checked only when devhost is given a keys file) -----


@app.route(route="secured", methods=["GET"], auth_level=func.AuthLevel.FUNCTION)
def secured(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("function level")


@app.route(route="admin-only", methods=["GET"], auth_level=func.AuthLevel.ADMIN)
def admin_only(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("admin level")


@app.entity_trigger(context_name="context")
def crasher(context: df.DurableEntityContext):
    if context.operation_name == "crash":
        os._exit(14)  # kills whatever process runs the batch
    context.set_state((context.get_state(lambda: 0) or 0) + 1)


@app.route(route="start-hello", methods=["POST"])
@app.durable_client_input(client_name="client")
async def start_hello(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    instance_id = await client.start_new("hello")
    return client.create_check_status_response(req, instance_id)


# ----- call_http: the built-in HTTP activity (no functionTimeout applies to it) -----


@app.orchestration_trigger(context_name="context")
def fetch_url(context: df.DurableOrchestrationContext):
    response = yield context.call_http("GET", context.get_input())
    return response["statusCode"]
