"""The route table (`http_api.routes`): one declaration per route gives the function the Functions host indexes, the
check of its path parameters and its operation in `/api/openapi.json`.

The real app is indexed as the host indexes it (devhost's loader, `app.get_functions()`) and compared with the
document it serves, both ways; each of its HTTP functions is put through the checks the Python worker applies when it
loads a function in HTTP v2 mode (`typing.get_type_hints`, parameter names against bindings, the extension's types).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import sys
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import azure.durable_functions as df
import azure.functions as func
import pytest
from azurefunctions.extensions.base import RequestTrackerMeta, ResponseTrackerMeta
from azurefunctions.extensions.http.fastapi import PlainTextResponse, Request, Response, StreamingResponse
from fastapi_requests import fastapi_request
from pydantic import ValidationError

from devhost.testing import InProcessHost
from http_api.adapter import http_endpoint, json_response
from http_api.caller import public
from http_api.openai_responses.errors import openai_endpoint
from http_api.path_ids import PathParam
from http_api.route_functions import register, route_function
from http_api.routes import FALLBACK, ROUTES
from http_api.routing import Route, RouteTableError, check_table

REPO_ROOT = Path(__file__).resolve().parents[2]
THING = PathParam(name="thing_id", not_found="thing_not_found", noun="Thing")
PART = PathParam(name="part_id", not_found="part_not_found", noun="Part")
CALLS: list[str] = []


@http_endpoint
async def get_thing(req: func.HttpRequest) -> func.HttpResponse:
    CALLS.append(req.route_params["thing_id"])
    return json_response({"thing": req.route_params["thing_id"], "method": req.method})


@http_endpoint
async def get_thing_with_client(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    return json_response({"client": type(client).__name__})


@openai_endpoint
async def get_openai_thing(req: func.HttpRequest) -> func.HttpResponse:
    CALLS.append(req.route_params["thing_id"])
    return json_response({})


@http_endpoint
@public
async def get_public_thing(req: func.HttpRequest) -> func.HttpResponse:
    return json_response({})


async def stream_thing(req: Request) -> Response:
    if req.query_params.get("plain"):
        return PlainTextResponse("not a stream")

    async def chunks() -> typing.AsyncIterator[str]:
        yield f"data: {req.path_params['thing_id']}\n\n"

    return StreamingResponse(chunks(), media_type="text/event-stream")


def thing_route(**overrides: Any) -> Route:
    declared: dict[str, Any] = {"name": "get_thing", "method": "get", "path": "things/{thing_id}", "params": (THING,),
                                "handler": get_thing, "summary": "A thing", "tag": "things"}
    return Route(**{**declared, **overrides})


def call(function: Callable[..., Any], thing_id: str, **kwargs: Any) -> Any:
    request = fastapi_request(f"/api/things/{thing_id}", method="GET", path_params={"thing_id": thing_id})
    return asyncio.run(function(req=request, **kwargs))


# ------------------------------------------------------------------------------------------------ declarations


def test_the_declared_path_parameters_are_the_templates() -> None:
    message = r"route 'get_thing' \(GET things/\{thing_id\}/parts/\{part_id\}\): the template's parameters " \
              r"\['thing_id', 'part_id'\] are not the declared ones \['thing_id'\]"
    with pytest.raises(ValidationError, match=message):
        thing_route(path="things/{thing_id}/parts/{part_id}")
    with pytest.raises(ValidationError, match="are not the declared ones"):
        thing_route(path="things/{id}")  # spelled differently
    with pytest.raises(ValidationError, match="are not the declared ones"):
        thing_route(path="things/{part_id}/{thing_id}", params=(THING, PART))  # in another order
    with pytest.raises(ValidationError, match="are not the declared ones"):
        thing_route(path="things")  # declared, not in the template
    assert thing_route(path="things/{thing_id}/parts/{part_id}", params=(THING, PART)).api_path == \
        "/api/things/{thing_id}/parts/{part_id}"


def test_a_declaration_that_contradicts_itself_fails_naming_the_route() -> None:
    with pytest.raises(ValidationError, match=r"route 'get_thing' .*: openai_events describes a stream"):
        thing_route(openai_events=True)
    with pytest.raises(ValidationError, match=r"route 'get_thing' .*: public=True but its handler is not marked"):
        thing_route(public=True)
    with pytest.raises(ValidationError, match="public=False but its handler is marked @public"):
        thing_route(handler=get_public_thing)
    with pytest.raises(ValidationError, match="must be a Python identifier"):
        thing_route(name="get-thing")
    with pytest.raises(ValidationError, match="without a slash"):
        thing_route(path="/things/{thing_id}")


def test_the_table_refuses_routes_that_collide() -> None:
    with pytest.raises(RouteTableError, match="routes 'get_thing' and 'get_thing' have the same function name"):
        check_table((thing_route(), thing_route(method="delete")))
    other = PathParam(name="other_id", not_found="thing_not_found", noun="Thing")
    with pytest.raises(RouteTableError, match=r"same method and path: GET things/\{\}"):
        check_table((thing_route(), thing_route(name="get_other", path="Things/{other_id}", params=(other,))))
    with pytest.raises(RouteTableError, match="same operation id: things"):
        check_table((thing_route(operation_id="things"), thing_route(name="list_things", path="things", params=(),
                                                                     operation_id="things")))
    assert len(check_table((thing_route(), thing_route(name="delete_thing", method="delete")))) == 2


def test_the_apps_table_holds_together() -> None:
    assert check_table(ROUTES) == ROUTES
    assert len({route.name for route in ROUTES}) == len(ROUTES) >= 30


# ------------------------------------------------------------------------------------------------ generated functions


def test_a_route_function_checks_the_declared_ids_before_its_handler() -> None:
    CALLS.clear()
    function = route_function(thing_route())
    answer = call(function, "t-1.a:b")
    assert isinstance(answer, Response) and answer.status_code == 200
    assert json.loads(answer.body) == {"thing": "t-1.a:b", "method": "GET"}
    for bad in ("a b", "-dash", "x" * 129, "café", ""):
        refused = call(function, bad)
        problem = json.loads(refused.body)
        assert refused.status_code == 404 and refused.headers["content-type"] == "application/problem+json"
        assert (problem["code"], problem["title"], problem["field"]) == ("thing_not_found", "Thing not found",
                                                                         "path.thing_id")
    assert CALLS == ["t-1.a:b"]  # the handler never saw a bad id


def test_a_declared_pattern_narrows_the_ids() -> None:
    digits = PathParam(name="thing_id", not_found="thing_not_found", noun="Thing", pattern=r"[0-9]{1,4}")
    function = route_function(thing_route(params=(digits,)))
    assert call(function, "123").status_code == 200
    refused = json.loads(call(function, "12a").body)
    assert refused["code"] == "thing_not_found" and "it must match [0-9]{1,4}" in refused["detail"]


def test_an_openai_route_refuses_bad_ids_in_openais_shape() -> None:
    CALLS.clear()
    refused = call(route_function(thing_route(handler=get_openai_thing)), "a b")
    assert refused.status_code == 404
    error = json.loads(refused.body)["error"]
    assert (error["code"], error["param"], error["type"]) == ("thing_not_found", "thing_id", "invalid_request_error")
    assert CALLS == []


def test_the_caller_is_identified_before_the_ids_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTH_MODE", "easyauth")
    refused = call(route_function(thing_route()), "a b")  # no principal: 401, whatever the id
    assert refused.status_code == 401 and json.loads(refused.body)["code"] == "unauthenticated"


def test_a_native_route_gets_the_extensions_request_and_may_stream() -> None:
    function = route_function(thing_route(name="stream_thing", handler=stream_thing, native=True, stream=True))
    assert typing.get_type_hints(function)["return"] is StreamingResponse
    streamed = call(function, "t1")
    assert isinstance(streamed, StreamingResponse) and streamed.media_type == "text/event-stream"
    plain = asyncio.run(function(req=fastapi_request("/api/things/t1", method="GET", query=b"plain=1",
                                                     path_params={"thing_id": "t1"})))
    assert isinstance(plain, PlainTextResponse) and plain.body == b"not a stream"


def test_registered_functions_are_what_the_worker_loads() -> None:
    app = df.DFApp(http_auth_level=func.AuthLevel.FUNCTION)
    register(app, check_table((
        thing_route(),
        thing_route(name="get_thing_with_client", method="post", handler=get_thing_with_client, client=True),
        thing_route(name="stream_thing", method="delete", handler=stream_thing, client=True, native=True,
                    stream=True),
        thing_route(name="get_public_thing", path="public", params=(), handler=get_public_thing, public=True),
    )))
    functions = {f.get_function_name(): f for f in app.get_functions()}
    assert list(functions) == ["get_thing", "get_thing_with_client", "stream_thing", "get_public_thing"]
    for name, function in functions.items():
        bindings = [json.loads(raw) for raw in function.get_raw_bindings()]
        assert_the_worker_loads(name, function.get_user_function(), bindings)
    trigger = {name: next(b for b in map(json.loads, f.get_raw_bindings()) if b["type"] == "httpTrigger")
               for name, f in functions.items()}
    assert trigger["get_thing_with_client"] == {"type": "httpTrigger", "direction": "IN", "name": "req",
                                                "methods": ["POST"], "route": "things/{thing_id}",
                                                "authLevel": "FUNCTION"}
    assert trigger["get_public_thing"]["authLevel"] == "ANONYMOUS"
    # The Durable client arrives as the host sends it (a JSON string) and reaches the handler as the client object.
    client_json = json.dumps({"taskHubName": "hub", "creationUrls": {}, "managementUrls": {}, "baseUrl": "http://h",
                              "requiredQueryStringParameters": "", "rpcBaseUrl": "http://h/"})
    answer = call(functions["get_thing_with_client"].get_user_function(), "t1", client=client_json)
    assert json.loads(answer.body) == {"client": "DurableOrchestrationClient"}


def assert_the_worker_loads(name: str, fn: Callable[..., Any], bindings: list[dict[str, Any]]) -> None:
    """What the Python worker checks when it loads an indexed function in HTTP v2 mode (`Registry.
    add_indexed_function`): annotations through `typing.get_type_hints` (which reads `__annotations__` in the
    function's globals, not `__signature__`), every parameter bound and every binding a parameter, the trigger typed
    with the extension's request, the return with one of its responses."""
    hints = typing.get_type_hints(fn)
    parameters = set(inspect.signature(fn).parameters)
    assert parameters == {b["name"] for b in bindings if b["name"] != "$return"}, name
    assert inspect.iscoroutinefunction(fn), name
    for binding in bindings:
        if binding["type"] == "httpTrigger":
            assert RequestTrackerMeta.check_type(hints[binding["name"]]), (name, hints)
        elif binding["type"] == "durableClient":
            assert hints[binding["name"]] is str, (name, hints)  # the DF decorator's contract with the worker
    assert ResponseTrackerMeta.check_type(hints["return"]), (name, hints)


# ------------------------------------------------------------------------------------------------ the real app


@pytest.fixture(scope="module")
def app_host() -> Iterator[InProcessHost]:
    with InProcessHost(REPO_ROOT, clock="virtual", env={"SESSION_STORE_PATH": ":memory:"}) as host:
        try:
            yield host
        finally:  # the app's services (built from this env) must not outlive it: the next app has its own settings
            sys.modules["agent_runs.services"].RunServices.reset()


def test_every_registered_route_is_in_the_document_with_its_parameters_and_back(app_host: InProcessHost) -> None:
    index = app_host.engine.index
    assert index.http_v2  # the streams need the extension: every HTTP function runs in its mode
    served: dict[tuple[str, str], tuple[str, list[str], bool]] = {}
    fallback = {route.name for route in FALLBACK}  # the catch-all for unknown routes: no operation to document
    for info in index.http_functions():
        assert info.route and info.methods and len(info.methods) == 1, info.name
        if info.name in fallback:
            continue
        trigger = next(b for b in info.bindings if b["type"] == "httpTrigger")
        template_params = re.findall(r"{(\w+)}", info.route)
        served[(info.methods[0].lower(), f"/api/{info.route}")] = (
            info.name, template_params, trigger["authLevel"] == "ANONYMOUS")
    document = app_host.client.get("/api/openapi.json").json()
    described: dict[tuple[str, str], tuple[str, list[str], bool]] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            path_params = [p["name"] for p in operation.get("parameters", []) if p["in"] == "path"]
            described[(method, path)] = (operation["operationId"], path_params, operation.get("security") == [])
    assert set(served) == set(described)
    operation_ids = {route.name: route.operation for route in ROUTES}
    for key, (name, params, anonymous) in served.items():
        assert described[key] == (operation_ids[name], params, anonymous), key
    assert len(served) == len(ROUTES)


def test_the_openapi_document_describes_what_a_caller_may_do_with_an_approval(app_host: InProcessHost) -> None:
    """`decidable` / `editable` on every approval a response carries (optional booleans: older clients ignore them)."""
    schemas = app_host.client.get("/api/openapi.json").json()["components"]["schemas"]
    for model in ("PendingApproval", "ApprovalView", "InboxItem"):
        fields = schemas[model]["properties"]
        for name in ("decidable", "editable"):
            assert fields[name]["type"] == "boolean" and fields[name]["description"], (model, name)
            assert name not in schemas[model].get("required", []), (model, name)


def test_every_function_of_the_app_is_what_the_worker_loads(app_host: InProcessHost) -> None:
    functions = app_host.engine.index.http_functions()
    assert {info.name for info in functions} == {route.name for route in (*ROUTES, *FALLBACK)}
    for info in functions:
        assert_the_worker_loads(info.name, info.fn, info.bindings)
    # Streams are annotated as such, so hosts serve them on the client's connection.
    assert {info.name for info in functions if info.streams} == {route.name for route in ROUTES if route.stream}


@pytest.mark.parametrize(
    ("path", "status", "code", "field"),
    [
        ("/api/runs/a%20b/stream", 404, "run_not_found", "path.run_id"),
        ("/api/workflows/runs/-x/stream", 404, "workflow_run_not_found", "path.run_id"),
        ("/api/ui/a%20b", 404, "ui_file_not_found", "path.file"),
        ("/api/agents/a%27b", 404, "agent_not_found", "path.agent"),
    ],
)
def test_the_app_refuses_ids_that_cannot_exist_as_declared(
    app_host: InProcessHost, path: str, status: int, code: str, field: str
) -> None:
    response = app_host.client.get(path)
    problem = response.json()
    assert (response.status_code, problem["code"], problem["field"]) == (status, code, field)
    assert response.headers["content-type"] == "application/problem+json"
    assert "is not a valid id" in problem["detail"]  # refused by the check, before any lookup


def test_an_openai_route_refuses_a_malformed_response_id_naming_it(app_host: InProcessHost) -> None:
    response = app_host.client.get("/api/v1/responses/resp%20x")
    error = response.json()["error"]
    assert response.status_code == 404
    assert (error["code"], error["param"], error["type"]) == ("response_not_found", "response_id",
                                                              "invalid_request_error")
    assert "is not a valid id" in error["message"]
