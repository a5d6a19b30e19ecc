"""HTTP triggers of every shape the host must serve (no durable functions)."""

import json
import logging
import os
import threading

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


def describe(req: func.HttpRequest) -> dict:
    return {
        "method": req.method,
        "url": req.url,
        "params": dict(req.params),
        "route_params": dict(req.route_params),
        "headers": {k: v for k, v in req.headers.items() if k.startswith("x-")},
        "body": req.get_body().decode("utf-8", "replace"),
    }


@app.route(route="hello", methods=["GET"])
def hello(req: func.HttpRequest) -> str:
    return f"hello {req.params.get('name', 'world')}"


@app.route(route="echo/{*rest}", methods=["GET", "POST", "PUT", "DELETE"])
def echo(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(json.dumps(describe(req)), mimetype="application/json")


@app.route(route="items/{id:int}")
def item_by_id(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(f"int:{req.route_params['id']}")


@app.route(route="items/{name}/{part?}")
def item_by_name(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(json.dumps(dict(req.route_params)), mimetype="application/json")


@app.route(route="async/{word:alpha}")
async def shout(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(req.route_params["word"].upper(), status_code=201, headers={"X-Shout": "yes"})


@app.route(route="json", methods=["POST"])
def json_body(req: func.HttpRequest) -> func.HttpResponse:
    try:
        payload = req.get_json()
    except ValueError:
        return func.HttpResponse("not json", status_code=400)
    return func.HttpResponse(json.dumps({"got": payload}), mimetype="application/json")


# The response only through a named http output: no `$return` binding (`app.route` would add one, and the worker
# then encodes the returned None into it and fails the call: see `return_with_named_output`).
@app.generic_trigger(arg_name="req", type="httpTrigger", route="out", authLevel="anonymous")
@app.generic_output_binding(arg_name="res", type="http")
def named_output(req: func.HttpRequest, res: func.Out[func.HttpResponse]) -> None:
    res.set(func.HttpResponse("from out binding", status_code=202))


@app.route(route="out-and-return")
@app.generic_output_binding(arg_name="res", type="http")
def return_with_named_output(req: func.HttpRequest, res: func.Out[func.HttpResponse]):
    res.set(func.HttpResponse("from out binding", status_code=202))


@app.route(route="context")
def with_context(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    return func.HttpResponse(json.dumps({"function": context.function_name, "invocation": context.invocation_id}))


@app.route(route="setting")
def setting(req: func.HttpRequest) -> str:
    return os.environ.get(req.params["name"], "<unset>")


@app.route(route="cookie")
def cookie(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("c", headers={"Set-Cookie": "a=1; Path=/"})


@app.route(route="boom")
def boom(req: func.HttpRequest) -> func.HttpResponse:
    raise RuntimeError("user code failed")


@app.route(route="aboom")
async def async_boom(req: func.HttpRequest) -> func.HttpResponse:
    raise ValueError("async user code failed")


@app.route(route="exit")
def exits(req: func.HttpRequest) -> func.HttpResponse:
    raise SystemExit(3)


@app.route(route="dict")
def returns_dict(req: func.HttpRequest):
    return {"not": "an HttpResponse"}


@app.route(route="none")
def returns_none(req: func.HttpRequest):
    return None


@app.route(route="binary", methods=["POST"])
def binary(req: func.HttpRequest) -> func.HttpResponse:
    data = req.get_body()
    return func.HttpResponse(bytes(reversed(data)), mimetype="application/octet-stream")


_rendezvous = threading.Barrier(2, timeout=10)


@app.route(route="rendezvous/{side}")
def rendezvous(req: func.HttpRequest) -> str:
    """Returns only when a second request arrives: proves sync functions run concurrently on worker threads."""
    _rendezvous.wait()
    return req.route_params["side"]


@app.route(route="log")
def logs(req: func.HttpRequest) -> func.HttpResponse:
    log = logging.getLogger("http_basic.orders")
    log.info("order %s received", req.params.get("order"))
    try:
        raise KeyError("missing price")
    except KeyError:
        log.exception("order %s failed", req.params.get("order"))
    return func.HttpResponse("logged")
