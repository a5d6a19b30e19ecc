"""Real-worker mode: devhost runs the app through Azure's Python worker library (`azure-functions-runtime`).

Python 3.13+ with the library installed (`make test-py313`); skipped elsewhere. The library imports and indexes the
app, converts every binding and invokes every trigger, in worker processes, from the messages Azure's host sends;
devhost's HTTP server, Durable engine and replay stay the same. Each test asserts what a user of the app sees.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_host_http_triggers import REPEATED_HEADERS, REPEATED_QUERY
from test_http_streaming import assert_forwarded_as_the_host_proxies
from test_worker_indexing import REFUSED

from devhost.app_loader import AppLoadError
from devhost.testing import InProcessHost
from devhost.worker.pool import library_version

pytestmark = pytest.mark.skipif(library_version() is None,
                                reason="azure-functions-runtime needs Python 3.13+ (make test-py313)")

APPS = Path(__file__).resolve().parents[1] / "apps"


def real(app: str, **kwargs: object) -> InProcessHost:
    return InProcessHost(APPS / app, worker="runtime", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("app", sorted(REFUSED))
def test_the_worker_refuses_the_app_with_its_own_message(app: str) -> None:
    _common, _worker_text, runtime_text = REFUSED[app]
    with pytest.raises(AppLoadError) as caught:
        real(app).start()
    assert str(caught.value).endswith(runtime_text)


@pytest.fixture(scope="module")
def http_basic() -> Iterator[InProcessHost]:
    with real("http_basic") as host:
        yield host


def test_status_names_the_worker_library(http_basic: InProcessHost) -> None:
    status = http_basic.client.get("/admin/host/status").json()
    assert (status["state"], status["worker"]) == ("Running", f"azure-functions-runtime {library_version()}")
    assert len(http_basic.host.worker_pids) == 2  # one for HTTP/activities, one for orchestrators/entities
    assert os.getpid() not in http_basic.host.worker_pids


def test_http_requests_and_responses_go_through_the_worker(http_basic: InProcessHost) -> None:
    client = http_basic.client
    assert client.get("/api/hello", params={"name": "Tokyo"}).text == "hello Tokyo"
    assert client.get("/api/items/42").text == "int:42"
    named = client.get("/api/out")
    assert (named.status_code, named.text) == (202, "from out binding")
    assert client.get("/api/cookie").headers["set-cookie"] == "a=1; Path=/"
    assert client.post("/api/binary", content=bytes(range(256))).content == bytes(reversed(range(256)))
    seen = client.get("/api/context").json()
    assert seen["function"] == "with_context" and seen["invocation"]


def test_repeated_query_names_reach_the_worker_as_the_functions_host_sends_them(http_basic: InProcessHost) -> None:
    """The query map of the worker protocol's `RpcHttp` holds one string per name: the worker's `req.params`."""
    query, params = REPEATED_QUERY
    assert http_basic.client.get(f"/api/echo/q?{query}").json()["params"] == params


def test_repeated_headers_reach_the_worker_as_the_functions_host_sends_them(http_basic: InProcessHost) -> None:
    """The header map of `RpcHttp` holds one string per lower-case name: the worker's `req.headers`."""
    sent, seen = REPEATED_HEADERS
    assert http_basic.client.get("/api/echo/h", headers=sent).json()["headers"] == seen


@pytest.mark.parametrize("path", ["/api/boom", "/api/aboom", "/api/exit", "/api/dict", "/api/none",
                                  "/api/out-and-return"])
def test_failures_in_user_code_are_500_and_the_host_keeps_serving(http_basic: InProcessHost, path: str) -> None:
    assert http_basic.client.get(path).status_code == 500
    assert http_basic.client.get("/api/hello", params={"name": "x"}).status_code == 200


def test_a_worker_process_that_dies_is_replaced(http_basic: InProcessHost) -> None:
    pool = http_basic.host.functions
    [victim] = pool.function_pids  # type: ignore[attr-defined]
    os.kill(victim, signal.SIGKILL)
    # A request racing the crash fails with 500 as on Azure; once the replacement is up, the app serves again.
    assert pool.wait_until_replaced(victim, timeout=120)  # type: ignore[attr-defined]
    assert http_basic.client.get("/api/hello", params={"name": "again"}, timeout=120).text == "hello again"
    assert victim not in http_basic.host.worker_pids and len(http_basic.host.worker_pids) == 2


def test_orchestration_activity_and_durable_client_binding() -> None:
    with real("http_durable", clock="auto-skip") as host:
        started = host.client.post("/api/orchestrators/hello_sequence")
        assert started.status_code == 202, started.text
        status = host.wait_for_status(started.json()["id"])
        assert status["runtimeStatus"] == "Completed", status
        assert status["output"] == ["Hello Tokyo!", "Hello Seattle!", "Hello London!"]


def test_entities_run_in_the_worker() -> None:
    with real("entity_counter", clock="auto-skip") as host:
        instance = host.run(host.engine.start_new("counter_orch"))
        status = host.wait_for_status(instance)
        assert status["output"] == {"value": 5, "error": "plain failure"}, status


def test_a_hung_orchestrator_worker_is_replaced_and_the_episode_retried() -> None:
    with real("http_durable", clock="auto-skip") as host:
        pool = host.host.functions
        pool.episode_timeout = 2.0  # type: ignore[attr-defined]
        [hung] = pool.durable_pids  # type: ignore[attr-defined]
        os.kill(hung, signal.SIGSTOP)  # to the host, a worker stuck in user code
        started = host.client.post("/api/orchestrators/hello_sequence")
        assert started.status_code == 202, started.text
        status = host.wait_for_status(started.json()["id"], timeout=120)
        assert status["output"] == ["Hello Tokyo!", "Hello Seattle!", "Hello London!"], status
        assert hung not in host.host.worker_pids
        assert host.client.get("/admin/host/status").status_code == 200


def test_streaming_functions_stream_through_the_worker() -> None:
    with real("http_streaming", clock="real") as host:
        with host.client.stream("GET", "/api/ticks/w", params={"count": 2}) as response:
            assert response.status_code == 200 and response.headers["x-stream"] == "w"
            lines = (line for line in response.iter_lines() if line.startswith("data: "))
            assert next(lines) == "data: tick 0"  # before the function may go on: the stream is live
            assert host.client.post("/api/gates/w-1").status_code == 204
            assert list(lines) == ["data: tick 1"]
        assert host.client.get("/api/seen/w").json() == ["sent 0", "sent 1", "finished"]
        plain = host.client.post("/api/echo/x", content=b"b")
        assert plain.status_code == 200 and plain.json()["path_params"] == {"a": "x"}
        assert plain.json()["pid"] != os.getpid()
        assert host.client.get("/api/fails").status_code == 500


def test_the_worker_sees_the_forwarded_headers_the_host_sets() -> None:
    """The worker's web server is reached at its own address: the app learns the client's URL only from these."""
    with real("http_streaming", clock="real") as host:
        assert_forwarded_as_the_host_proxies(host)


def after_first_tick(response: httpx.Response) -> Iterator[str]:
    """The stream's data lines, its first (`tick 0`) read: the client is connected."""
    lines = (line for line in response.iter_lines() if line.startswith("data: "))
    assert next(lines) == "data: tick 0"
    return lines


def wait_until_stopped(host: InProcessHost, name: str) -> list[str]:
    """What the `ticks/{name}` generator recorded, once it has been stopped (bounded wait: nothing answers it)."""
    deadline = time.monotonic() + 30
    while not (seen := host.client.get(f"/api/seen/{name}").json())[-1].startswith("stopped: "):
        assert time.monotonic() < deadline, f"the generator {name!r} still runs for a client that has gone: {seen}"
        time.sleep(0.02)
    return seen


def test_a_client_that_leaves_a_stream_stops_it_and_fails_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """As the host's proxy does: once a write to the client fails (it has gone), the request to the worker's HTTP
    server is closed, the function's generator is cancelled, and the invocation's outcome is the worker's answer, not
    a failure of the function (no "Failed" record)."""
    with real("http_streaming", clock="real") as host, caplog.at_level(logging.INFO, logger="devhost"):
        with host.client.stream("GET", "/api/ticks/gone", params={"count": 3}) as response:
            after_first_tick(response)
        # The client has gone; the next chunk (tick 1, once the gate opens) cannot reach it.
        assert host.client.post("/api/gates/gone-1").status_code == 204
        assert wait_until_stopped(host, "gone")[:2] == ["sent 0", "sent 1"]
    executed = [r.getMessage() for r in caplog.records if "Functions.ticks" in r.getMessage()]
    assert executed and all("(Succeeded" in m for m in executed), executed


def test_a_client_that_leaves_an_idle_stream_stops_it_at_once() -> None:
    """The host's proxy notices a client that leaves while the function writes nothing (a generator waiting, here on
    a gate; an agent's stream between pings): the request to the worker's HTTP server is closed and the generator
    stopped, not left running until its next write fails."""
    with real("http_streaming", clock="real") as host:
        with host.client.stream("GET", "/api/ticks/idle", params={"count": 3}) as response:
            after_first_tick(response)
        seen = wait_until_stopped(host, "idle")
        assert len(seen) == 2 and seen[0] == "sent 0", seen


def test_of_two_idle_streams_only_the_one_whose_client_left_stops() -> None:
    """Two streams at once, both waiting: one client leaves, and only its generator stops; the other stream goes on
    and ends normally once its gate opens."""
    with real("http_streaming", clock="real") as host:
        with host.client.stream("GET", "/api/ticks/stays", params={"count": 2}) as staying:
            kept = after_first_tick(staying)
            with host.client.stream("GET", "/api/ticks/goes", params={"count": 2}) as leaving:
                after_first_tick(leaving)
            seen = wait_until_stopped(host, "goes")
            assert len(seen) == 2 and seen[0] == "sent 0", seen
            assert host.client.get("/api/seen/stays").json() == ["sent 0"]
            assert host.client.post("/api/gates/stays-1").status_code == 204
            assert list(kept) == ["data: tick 1"]
        assert host.client.get("/api/seen/stays").json() == ["sent 0", "sent 1", "finished"]


def test_the_apps_logs_reach_the_host_under_their_logger_names(
    http_basic: InProcessHost, caplog: pytest.LogCaptureFixture
) -> None:
    """As on Azure, where the worker sends each record to the host as an RpcLog: level, message and stack trace."""
    with caplog.at_level(logging.INFO, logger="http_basic.orders"):
        assert http_basic.client.get("/api/log", params={"order": "A-7"}).text == "logged"
    records = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "http_basic.orders"]
    assert records[0] == (logging.INFO, "order A-7 received")
    level, text = records[1]
    assert level == logging.ERROR and text.startswith("order A-7 failed\nTraceback (most recent call last):")
    assert "KeyError: 'missing price'" in text
    assert all(r.process == os.getpid() for r in caplog.records)  # re-emitted by the host, not captured in a worker
