"""`http_api.fastapi_bridge`: the app's `func.HttpRequest` handlers under the HTTP streaming extension (HTTP v2),
where the worker hands every HTTP function a FastAPI request and loads only functions typed with its types."""

from __future__ import annotations

import asyncio
import inspect
import json

import azure.durable_functions as df
import azure.functions as func
from azurefunctions.extensions.base import RequestTrackerMeta, ResponseTrackerMeta
from azurefunctions.extensions.http.fastapi import Request, Response, StreamingResponse

from http_api.fastapi_bridge import DFApp, bridge, public_url, to_fastapi_response, to_func_request


def fastapi_request(path: str, *, query: bytes = b"", headers: dict[str, str] | None = None, body: bytes = b"",
                    path_params: dict[str, str] | None = None) -> Request:
    sent = False

    async def receive() -> dict:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    raw = [(b"host", b"example.test")] + [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "query_string": query,
             "headers": raw, "scheme": "http", "server": ("example.test", 80), "path_params": path_params or {}}
    return Request(scope, receive)


def test_a_fastapi_request_becomes_the_func_request_handlers_expect() -> None:
    request = fastapi_request("/api/runs/r1", query=b"wait_seconds=2", headers={"X-Custom": "v"}, body=b'{"a":1}',
                              path_params={"run_id": "r1"})
    converted = asyncio.run(to_func_request(request))
    assert converted.method == "POST" and converted.url == "http://example.test/api/runs/r1?wait_seconds=2"
    assert converted.route_params == {"run_id": "r1"} and converted.params == {"wait_seconds": "2"}
    assert converted.headers["x-custom"] == "v" and converted.get_json() == {"a": 1}


def test_links_use_the_forwarded_host() -> None:
    request = fastapi_request("/api/x", headers={"X-Forwarded-Host": "app.example.net", "X-Forwarded-Proto": "https"})
    assert public_url(request) == "https://app.example.net/api/x"


def test_a_func_response_becomes_a_fastapi_response() -> None:
    response = to_fastapi_response(func.HttpResponse('{"ok":1}', status_code=202, mimetype="application/json",
                                                     headers={"Retry-After": "1"}))
    assert response.status_code == 202 and response.body == b'{"ok":1}'
    assert response.headers["retry-after"] == "1"
    assert response.headers["content-type"].startswith("application/json")


def test_bridged_handlers_carry_the_extensions_types() -> None:
    async def handler(req: func.HttpRequest, client: str) -> func.HttpResponse:
        body = json.dumps({"route": dict(req.route_params), "client": client})
        return func.HttpResponse(body, mimetype="application/json")

    bridged = bridge(handler)
    signature = inspect.signature(bridged)
    assert RequestTrackerMeta.check_type(signature.parameters["req"].annotation)
    assert ResponseTrackerMeta.check_type(signature.return_annotation)
    answer = asyncio.run(bridged(req=fastapi_request("/api/a", path_params={"x": "1"}), client="c"))
    assert isinstance(answer, Response) and json.loads(answer.body) == {"route": {"x": "1"}, "client": "c"}
    plain = asyncio.run(bridged(req=func.HttpRequest("GET", "http://h/api/a", body=b""), client="c"))
    assert isinstance(plain, func.HttpResponse)  # without the extension's request, nothing is converted


def test_the_app_wraps_routes_with_durable_clients_and_leaves_native_ones() -> None:
    app = DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)

    @app.route(route="old/{x}", methods=["GET"])
    @app.durable_client_input(client_name="client")
    async def old(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
        return func.HttpResponse(req.route_params["x"])

    async def new(req: Request) -> StreamingResponse:
        raise AssertionError("not called")

    app.route(route="new", methods=["GET"])(new)
    functions = {f.get_function_name(): f.get_user_function() for f in app.get_functions()}
    assert RequestTrackerMeta.check_type(inspect.signature(functions["old"]).parameters["req"].annotation)
    assert functions["new"] is new  # already written for the extension: left alone
