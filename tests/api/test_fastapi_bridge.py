"""`http_api.fastapi_bridge`: the app's `func.HttpRequest` handlers under the HTTP streaming extension (HTTP v2),
where the worker hands every HTTP function a FastAPI request: the request and response conversions."""

from __future__ import annotations

import asyncio

import azure.functions as func
from fastapi_requests import fastapi_request

from http_api.fastapi_bridge import public_url, to_fastapi_response, to_func_request


def test_a_fastapi_request_becomes_the_func_request_handlers_expect() -> None:
    request = fastapi_request("/api/runs/r1", query=b"wait_seconds=2", headers={"X-Custom": "v"}, body=b'{"a":1}',
                              path_params={"run_id": "r1"})
    converted = asyncio.run(to_func_request(request))
    assert converted.method == "POST" and converted.url == "http://example.test/api/runs/r1?wait_seconds=2"
    assert converted.route_params == {"run_id": "r1"} and converted.params == {"wait_seconds": "2"}
    assert converted.headers["x-custom"] == "v" and converted.get_json() == {"a": 1}


def test_a_repeated_query_name_reads_as_azures_host_passes_it() -> None:
    """Every non-empty value comma-joined, a name without one left out (not `dict(query_params)`'s last value)."""
    query = b"include[]=a&include[]=b&limit=1&limit=&limit=2&after=&x=%2C"
    converted = asyncio.run(to_func_request(fastapi_request("/api/x", query=query)))
    assert converted.params == {"include[]": "a,b", "limit": "1,2", "x": ","}
    assert converted.url.endswith("/api/x?" + query.decode())  # the URL keeps every value as sent


def test_a_repeated_header_reads_as_azures_host_passes_it() -> None:
    """Each lower-case name once, its non-empty values comma-joined, an empty header kept (`RpcHttp.headers`): two
    Authorization headers read as neither one."""
    request = fastapi_request("/api/x", headers={"Authorization": "Bearer a"})
    request.scope["headers"] += [(b"authorization", b"Bearer b"), (b"x-gap", b"1"), (b"x-gap", b""), (b"x-gap", b"2"),
                                 (b"x-empty", b""), (b"x-joined", b"1, 2")]
    converted = asyncio.run(to_func_request(request))
    assert {k: v for k, v in converted.headers.items() if k != "host"} == {
        "authorization": "Bearer a,Bearer b", "x-gap": "1,2", "x-empty": "", "x-joined": "1, 2"}
    assert converted.headers["Authorization"] == "Bearer a,Bearer b"  # names looked up ignoring case


def test_links_use_the_forwarded_host() -> None:
    request = fastapi_request("/api/x", headers={"X-Forwarded-Host": "app.example.net", "X-Forwarded-Proto": "https"})
    assert public_url(request) == "https://app.example.net/api/x"


def test_a_func_response_becomes_a_fastapi_response() -> None:
    response = to_fastapi_response(func.HttpResponse('{"ok":1}', status_code=202, mimetype="application/json",
                                                     headers={"Retry-After": "1"}))
    assert response.status_code == 202 and response.body == b'{"ok":1}'
    assert response.headers["retry-after"] == "1"
    assert response.headers["content-type"].startswith("application/json")


def test_a_repeated_response_header_keeps_its_first_value_as_the_headers_mapping_does() -> None:
    answer = func.HttpResponse("{}", mimetype="application/json", headers={"X-Two": "1"})
    answer.headers.add("X-Two", "2")
    response = to_fastapi_response(answer)
    assert response.headers.getlist("x-two") == [dict(answer.headers)["X-Two"]] == ["1"]
