"""A durable app whose HTTP triggers drive every `DurableOrchestrationClient` method (the host tests call them)."""

import asyncio
import json
import os
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)


def as_json(value, status: int = 200) -> func.HttpResponse:
    return func.HttpResponse(json.dumps(value), status_code=status, mimetype="application/json")


def sdk_error(exc: Exception) -> func.HttpResponse:
    """The SDK raised: report its message so a test can assert what the client saw."""
    return as_json({"error": str(exc)}, status=599)


def status_dict(status) -> dict:
    if not status:  # a 404: the SDK builds an empty, falsy status (its to_json() cannot serialise it)
        return {"truthy": False, "runtime_status": status.runtime_status}
    body = status.to_json()
    body["historyEvents"] = getattr(status, "historyEvents", None)
    body["truthy"] = bool(status)
    return body


# ----- orchestrations, activities, entity -----


@app.orchestration_trigger(context_name="context")
def hello_sequence(context: df.DurableOrchestrationContext):
    cities = context.get_input() or ["Tokyo", "Seattle", "London"]
    results = []
    for city in cities:
        results.append((yield context.call_activity("say_hello", city)))
    return results


@app.activity_trigger(input_name="city")
def say_hello(city: str) -> str:
    return f"Hello {city}!"


@app.orchestration_trigger(context_name="context")
def echo_input(context: df.DurableOrchestrationContext):
    return context.get_input()


@app.orchestration_trigger(context_name="context")
def start_another(context: df.DurableOrchestrationContext):
    """An activity with the Durable client binding starts another orchestration (fire and forget)."""
    started = yield context.call_activity("start_echo", context.get_input())
    return started


@app.activity_trigger(input_name="payload")
@app.durable_client_input(client_name="client")
async def start_echo(payload: dict, client: df.DurableOrchestrationClient) -> str:
    return await client.start_new("echo_input", payload["instance_id"], payload)


@app.orchestration_trigger(context_name="context")
def wait_event(context: df.DurableOrchestrationContext):
    context.set_custom_status("waiting")
    payload = yield context.wait_for_external_event("Approval")
    return {"payload": payload, "type": type(payload).__name__}


@app.orchestration_trigger(context_name="context")
def wait_timer(context: df.DurableOrchestrationContext):
    hours = (context.get_input() or {}).get("hours", 1)
    yield context.create_timer(context.current_utc_datetime + timedelta(hours=hours))
    return "timer fired"


@app.orchestration_trigger(context_name="context")
def failing(context: df.DurableOrchestrationContext):
    yield context.call_activity("explode", None)
    return "unreachable"


@app.activity_trigger(input_name="unused")
def explode(unused) -> str:
    raise ValueError("boom")


@app.orchestration_trigger(context_name="context")
def gated(context: df.DurableOrchestrationContext):
    """An activity that blocks until a gate file exists, then an event wait: the restart test kills the host here."""
    first = yield context.call_activity("gated_step", "step-1")
    approval = yield context.wait_for_external_event("Go")
    yield context.create_timer(context.current_utc_datetime + timedelta(hours=1))
    second = yield context.call_activity("say_hello", "after-timer")
    return [first, approval, second]


@app.activity_trigger(input_name="name")
def gated_step(name: str) -> str:
    gate_dir = Path(os.environ["DEVHOST_TEST_GATE_DIR"])
    (gate_dir / f"started-{uuid.uuid4().hex}").write_text(name)
    while not (gate_dir / "open").exists():
        time.sleep(0.01)
    return f"{name} done"


@app.orchestration_trigger(context_name="context")
def gated_client(context: df.DurableOrchestrationContext):
    """An activity taking the Durable client, in flight when the restart test kills the host."""
    return (yield context.call_activity("gated_client_step", context.instance_id))


@app.activity_trigger(input_name="instance_id")
@app.durable_client_input(client_name="client")
async def gated_client_step(instance_id: str, client: df.DurableOrchestrationClient) -> str:
    gate_dir = Path(os.environ["DEVHOST_TEST_GATE_DIR"])
    (gate_dir / f"client-started-{uuid.uuid4().hex}").write_text(instance_id)
    while not (gate_dir / "open").exists():
        await asyncio.sleep(0.01)
    status = await client.get_status(instance_id)
    return f"{instance_id} is {status.runtime_status.value}"


@app.entity_trigger(context_name="context")
def Counter(context: df.DurableEntityContext):
    value = context.get_state(lambda: 0)
    operation = context.operation_name
    if operation == "add":
        value += context.get_input()
    elif operation == "reset":
        value = 0
    context.set_state(value)
    context.set_result(value)


# ----- HTTP triggers driving the client -----


@app.route(route="orchestrators/{name}/{instance_id?}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def start(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    body = req.get_body()
    client_input = json.loads(body) if body else None
    try:
        instance_id = await client.start_new(req.route_params["name"], req.route_params.get("instance_id"),
                                             client_input)
    except Exception as exc:
        return sdk_error(exc)
    return client.create_check_status_response(req, instance_id)


@app.route(route="start-and-wait/{name}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def start_and_wait(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    body = req.get_body()
    instance_id = await client.start_new(req.route_params["name"], None, json.loads(body) if body else None)
    # A generous default wait: the tests that expect the output must not get the 202 on a slow, loaded machine.
    return await client.wait_for_completion_or_create_check_status_response(
        req, instance_id, int(req.params.get("timeout_ms", "60000")), int(req.params.get("retry_ms", "50"))
    )


@app.route(route="status/{instance_id}", methods=["GET"])
@app.durable_client_input(client_name="client")
async def status(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    result = await client.get_status(
        req.route_params["instance_id"],
        show_history=req.params.get("history") == "1",
        show_history_output=req.params.get("output") == "1",
        show_input=req.params.get("input") == "1",
    )
    return as_json(status_dict(result))


@app.route(route="statuses", methods=["GET"])
@app.durable_client_input(client_name="client")
async def statuses(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    if not req.params:
        found = await client.get_status_all()
    else:
        runtime = req.params.get("status")
        found = await client.get_status_by(
            created_time_from=datetime.fromisoformat(req.params["from"]) if "from" in req.params else None,
            created_time_to=datetime.fromisoformat(req.params["to"]) if "to" in req.params else None,
            runtime_status=[df.OrchestrationRuntimeStatus(s) for s in runtime.split(",")] if runtime else None,
            instance_id_prefix=req.params.get("prefix"),
        )
    return as_json(sorted(s.instance_id for s in found))


@app.route(route="instances/{instance_id}/{operation}", methods=["POST", "DELETE"])
@app.durable_client_input(client_name="client")
async def manage(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    instance_id, operation = req.route_params["instance_id"], req.route_params["operation"]
    reason = req.params.get("reason", "because")
    try:
        if operation == "raise":
            await client.raise_event(instance_id, req.params["event"], json.loads(req.get_body() or b"null"))
            result = None
        elif operation == "terminate":
            result = await client.terminate(instance_id, reason)
        elif operation == "suspend":
            result = await client.suspend(instance_id, reason)
        elif operation == "resume":
            result = await client.resume(instance_id, reason)
        elif operation == "rewind":
            result = await client.rewind(instance_id, reason)
        elif operation == "restart":
            result = await client.restart(instance_id, req.params.get("new", "true") == "true")
        elif operation == "purge":
            result = (await client.purge_instance_history(instance_id)).instances_deleted
        elif operation == "payload":
            result = client.create_http_management_payload(instance_id)
        else:
            return as_json({"error": f"unknown operation {operation}"}, 400)
    except Exception as exc:
        return sdk_error(exc)
    return as_json({"result": result})


@app.route(route="purge", methods=["DELETE"])
@app.durable_client_input(client_name="client")
async def purge_by(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    runtime = req.params.get("status")
    try:
        result = await client.purge_instance_history_by(
            created_time_from=datetime.fromisoformat(req.params["from"]) if "from" in req.params else None,
            created_time_to=datetime.now(UTC) + timedelta(days=1),
            runtime_status=[df.OrchestrationRuntimeStatus(s) for s in runtime.split(",")] if runtime else None,
        )
    except Exception as exc:
        return sdk_error(exc)
    return as_json({"deleted": result.instances_deleted})


@app.route(route="entities/{name}/{key}", methods=["GET", "POST"])
@app.durable_client_input(client_name="client")
async def entity(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    entity_id = df.EntityId(req.route_params["name"], req.route_params["key"])
    try:
        if req.method == "POST":
            body = req.get_body()
            await client.signal_entity(entity_id, req.params["op"], json.loads(body) if body else None)
            return as_json({"signalled": True}, 202)
        state = await client.read_entity_state(entity_id)
    except Exception as exc:
        return sdk_error(exc)
    return as_json({"exists": state.entity_exists, "state": state.entity_state})


@app.route(route="binding", methods=["GET"])
@app.generic_input_binding(arg_name="starter", type="durableClient")
def binding(req: func.HttpRequest, starter: str) -> func.HttpResponse:
    """The raw `durableClient` binding JSON, as the worker receives it."""
    return func.HttpResponse(starter, mimetype="application/json")


@app.route(route="agents/{key}/run", methods=["POST"])
@app.durable_client_input(client_name="client")
async def agent_like_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    """AgentFunctionApp's pattern (E.7): signal an entity, then hold the request while polling its committed state."""
    entity_id = df.EntityId("Counter", req.route_params["key"])
    before = await client.read_entity_state(entity_id)
    expected = (before.entity_state if before.entity_exists else 0) + int(req.params.get("amount", "1"))
    await client.signal_entity(entity_id, "add", int(req.params.get("amount", "1")))
    for _ in range(500):
        state = await client.read_entity_state(entity_id)
        if state.entity_exists and state.entity_state == expected:
            return as_json({"state": state.entity_state})
        await asyncio.sleep(0.01)
    return as_json({"error": "the entity did not commit in time"}, 504)
