"""HTTP v2 mode (`azurefunctions-extensions-http-fastapi`) on devhost, as the Python worker serves it: functions get a
real `fastapi.Request`, a `StreamingResponse` reaches the client chunk by chunk as the generator yields, a client
that disconnects cancels the generator, plain FastAPI return values are JSON, failures are FastAPI's 500, apps that
do not use the extension keep `func.HttpRequest`, and with worker processes the streams are served by the host.

The streaming app's generators wait on gates the test opens with a request, so "the client has chunk n before chunk
n+1 exists" is shown by order, not by timing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devhost.app_loader import AppLoadError, load_app
from devhost.testing import InProcessHost

APPS = Path(__file__).resolve().parent.parent / "apps"
APP = APPS / "http_streaming"


@pytest.fixture(scope="module")
def host() -> Iterator[InProcessHost]:
    with InProcessHost(APP, clock="real") as running:
        yield running


def events(lines: Iterator[str]) -> Iterator[str]:
    for line in lines:
        if line.startswith("data: "):
            yield line[len("data: "):]


def wait_for(predicate, what: str, deadline_s: float = 10.0) -> None:
    """Bounded wait for something the host does after the client is gone (no answer to wait on)."""
    deadline = time.monotonic() + deadline_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.02)


def test_the_app_is_served_in_http_v2_mode(host: InProcessHost) -> None:
    response = host.client.get("/api/unannotated")
    assert response.text == "starlette.requests.Request"  # fastapi.Request, even without an annotation


def test_the_function_gets_a_real_fastapi_request(host: InProcessHost) -> None:
    response = host.client.post("/api/echo/x/y%20z?q=1", content=b"payload", headers={"X-Custom": "v"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    seen = response.json()
    assert seen["method"] == "POST"
    assert seen["path_params"] == {"a": "x", "b": "y z"}
    assert seen["query"] == {"q": "1"}
    assert seen["header"] == "v"
    assert seen["body"] == "payload"
    assert seen["url"].split("/api/", 1)[1] == "echo/x/y z?q=1"  # Starlette builds it from the decoded path


def assert_forwarded_as_the_host_proxies(host: InProcessHost) -> None:
    """The function reads where the request came in from X-Forwarded-* set by the host (as the Functions host's proxy
    does on Azure); values the client sent for them are replaced, never passed on."""
    forged = {"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9",
              "X-Forwarded-Prefix": "/evil"}
    seen = host.client.post("/api/echo/x", content=b"", headers=forged).json()["forwarded"]
    assert seen == {"for": "127.0.0.1", "proto": "http", "host": host.base_url.split("://", 1)[1], "prefix": None}


def test_the_function_sees_the_forwarded_headers_the_host_sets(host: InProcessHost) -> None:
    assert_forwarded_as_the_host_proxies(host)


def test_optional_route_values_absent(host: InProcessHost) -> None:
    assert host.client.put("/api/echo/only", content=b"").json()["path_params"] == {"a": "only"}


def test_chunks_reach_the_client_as_they_are_yielded(host: InProcessHost) -> None:
    with host.client.stream("GET", "/api/ticks/order", params={"count": 3}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-stream"] == "order"
        received = events(response.iter_lines())
        # tick 0 arrives while the generator is blocked on gate 1: it was sent when yielded, not at the end.
        assert next(received) == "tick 0"
        assert host.client.get("/api/seen/order").json() == ["sent 0"]
        assert host.client.post("/api/gates/order-1").status_code == 204
        assert next(received) == "tick 1"
        assert host.client.post("/api/gates/order-2").status_code == 204
        assert next(received) == "tick 2"
        assert list(received) == []
    assert host.client.get("/api/seen/order").json() == ["sent 0", "sent 1", "sent 2", "finished"]


def test_a_client_disconnect_cancels_the_generator(host: InProcessHost) -> None:
    with host.client.stream("GET", "/api/ticks/leave", params={"count": 5}) as response:
        assert next(events(response.iter_lines())) == "tick 0"
    # The client is gone while the generator waits for gate 1: the host cancels it.
    wait_for(lambda: len(host.client.get("/api/seen/leave").json()) == 2, "the generator to stop")
    seen = host.client.get("/api/seen/leave").json()
    assert seen[0] == "sent 0" and seen[1].startswith("stopped: ")
    # The gate opening later does not revive it.
    host.client.post("/api/gates/leave-1")
    assert host.client.get("/api/seen/leave").json() == seen


def test_a_client_gone_before_its_next_chunk_is_written_cancels_the_generator(
    host: InProcessHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client leaves and the generator's next chunk is written before the host has noticed (here: never by
    itself). As uvicorn in the worker does, the write is dropped, not raised, and the disconnect reaches the app
    through `receive`: the generator is cancelled where it waits next. A write that raised stopped the response
    with the generator suspended at its `yield`, its `finally` waiting for the garbage collector (off here, as it
    is between its runs: the generator sits in a reference cycle)."""
    import gc

    from devhost.http import streaming

    monkeypatch.setattr(streaming, "DISCONNECT_POLL_SECONDS", 3600.0)
    gc.disable()
    try:
        with host.client.stream("GET", "/api/ticks/unnoticed", params={"count": 3}) as response:
            assert next(events(response.iter_lines())) == "tick 0"
        host.client.post("/api/gates/unnoticed-1")  # tick 1 goes to a connection the client has closed
        wait_for(lambda: len(host.client.get("/api/seen/unnoticed").json()) == 3, "the generator to stop")
        assert host.client.get("/api/seen/unnoticed").json() == ["sent 0", "sent 1", "stopped: CancelledError"]
    finally:
        gc.enable()


def test_two_streams_at_once_are_independent(host: InProcessHost) -> None:
    with host.client.stream("GET", "/api/ticks/a", params={"count": 2}) as first, \
            host.client.stream("GET", "/api/ticks/b", params={"count": 2}) as second:
        a, b = events(first.iter_lines()), events(second.iter_lines())
        assert (next(a), next(b)) == ("tick 0", "tick 0")
        host.client.post("/api/gates/b-1")
        assert next(b) == "tick 1"
        host.client.post("/api/gates/a-1")
        assert next(a) == "tick 1"


def test_sync_function_status_and_headers(host: InProcessHost) -> None:
    response = host.client.get("/api/sync-text")
    assert (response.status_code, response.text, response.headers["x-sync"]) == (201, "from a sync function", "yes")


def test_a_failing_function_is_fastapis_500(host: InProcessHost) -> None:
    response = host.client.get("/api/fails")
    assert (response.status_code, response.text) == (500, "Internal Server Error")
    assert host.client.get("/api/sync-text").status_code == 201  # and the host keeps serving


def test_apps_without_the_extension_keep_func_http_request(host: InProcessHost) -> None:
    # The extension is registered in this process now (the module-scoped host loaded it): other apps are unaffected.
    with InProcessHost(APPS / "http_basic", clock="real") as plain:
        response = plain.client.get("/api/hello", params={"name": "Tokyo"})
        assert (response.status_code, response.text) == (200, "hello Tokyo")


def test_func_http_request_annotations_do_not_load_beside_the_extension(tmp_path: Path) -> None:
    (tmp_path / "function_app.py").write_text(
        "import azure.functions as func\n"
        "from azurefunctions.extensions.http.fastapi import Request, StreamingResponse\n"
        "app = func.FunctionApp()\n"
        "@app.route(route='s')\n"
        "async def s(req: Request) -> StreamingResponse: ...\n"
        "@app.route(route='old')\n"
        "def old(req: func.HttpRequest) -> func.HttpResponse: ...\n"
    )
    with pytest.raises(AppLoadError, match=r'cannot load the old function: .* annotation "HttpRequest"'):
        load_app(tmp_path, module_name="function_app")


def test_a_patched_signature_does_not_change_what_the_worker_reads(tmp_path: Path) -> None:
    """The worker reads annotations with `typing.get_type_hints` (`__annotations__`), not `inspect.signature`: a
    wrapper that only patches `__signature__` to the extension's types still does not load."""
    (tmp_path / "function_app.py").write_text(
        "import functools, inspect\n"
        "import azure.functions as func\n"
        "from azurefunctions.extensions.http.fastapi import Request, Response\n"
        "app = func.FunctionApp()\n"
        "async def handler(req: func.HttpRequest) -> func.HttpResponse: ...\n"
        "@functools.wraps(handler)\n"
        "async def wrapped(req): ...\n"
        "wrapped.__signature__ = inspect.signature(handler).replace(\n"
        "    parameters=[inspect.Parameter('req', inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)],\n"
        "    return_annotation=Response)\n"
        "app.route(route='patched')(wrapped)\n"
    )
    with pytest.raises(AppLoadError, match=r'cannot load the handler function: .* annotation "HttpRequest"'):
        load_app(tmp_path, module_name="function_app")


def test_annotations_that_do_not_resolve_do_not_load(tmp_path: Path) -> None:
    (tmp_path / "function_app.py").write_text(
        "from __future__ import annotations\n"
        "import azure.functions as func\n"
        "from azurefunctions.extensions.http.fastapi import Request\n"
        "app = func.FunctionApp()\n"
        "@app.route(route='s')\n"
        "async def s(req: Request) -> Missing: ...\n"
    )
    with pytest.raises(AppLoadError, match="indexing failed: NameError: name 'Missing' is not defined"):
        load_app(tmp_path, module_name="function_app")


def test_init_indexing_off_disables_the_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHON_ENABLE_INIT_INDEXING", "false")
    index = load_app(APP)
    assert not index.http_v2


def test_with_worker_processes_streams_stay_in_the_host() -> None:
    with InProcessHost(APP, clock="real", workers=1) as running:
        assert int(running.client.get("/api/pid-stream").text) == os.getpid()
        plain = running.client.post("/api/echo/x", content=b"b").json()
        assert plain["pid"] in running.host.worker_pids and plain["path_params"] == {"a": "x"}
        assert running.client.get("/api/sync-text").headers["x-sync"] == "yes"
        assert running.client.get("/api/fails").status_code == 500
        with running.client.stream("GET", "/api/ticks/w", params={"count": 1}) as response:
            assert list(events(response.iter_lines())) == ["tick 0"]


def test_httpx_client_reads_streams_incrementally(host: InProcessHost) -> None:
    """Same as above through a fresh httpx client (not the host's), with a read timeout the gate never trips."""
    with httpx.Client(base_url=host.base_url, timeout=10) as client, \
            client.stream("GET", "/api/ticks/fresh", params={"count": 2}) as response:
        received = events(response.iter_lines())
        assert next(received) == "tick 0"
        client.post("/api/gates/fresh-1")
        assert next(received) == "tick 1"
