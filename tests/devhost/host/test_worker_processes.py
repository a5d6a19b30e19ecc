"""Worker processes (`workers=N`, FUNCTIONS_WORKER_PROCESS_COUNT): activity and HTTP functions run outside the host
process with the same behaviour as in it, a worker that dies is replaced, and no worker outlives its host."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devhost.host import worker_count_setting
from devhost.http.host_config import HostConfigError
from devhost.testing import InProcessHost, SubprocessHost
from devhost.workers import WorkerStartError

APP = Path(__file__).resolve().parent.parent / "apps" / "worker_processes"
WEBHOOKS = "/runtime/webhooks/durabletask"


@pytest.fixture(scope="module")
def host() -> Iterator[InProcessHost]:
    with InProcessHost(APP, clock="auto-skip", workers=2) as running:
        yield running


def start(host: InProcessHost, orchestrator: str, payload: dict) -> str:
    response = host.client.post(f"{WEBHOOKS}/orchestrators/{orchestrator}", json=payload)
    assert response.status_code == 202, response.text
    return response.json()["id"]


def gone(pid: int) -> bool:
    """The process has exited (a zombie nobody reaped counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def wait_until(predicate, what: str, deadline_s: float = 30.0) -> None:
    """Bounded wait on something outside the host (another process exiting)."""
    deadline = time.monotonic() + deadline_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.02)


def test_an_activity_in_a_worker_takes_the_durable_client(host: InProcessHost) -> None:
    instance_id = start(host, "start_another", {"child": "child-of-a-worker"})
    status = host.wait_for_status(instance_id, timeout=60)
    assert status["runtimeStatus"] == "Completed", status
    assert status["output"]["pid"] in host.host.worker_pids
    child = host.wait_for_status("child-of-a-worker", timeout=60)
    assert child["runtimeStatus"] == "Completed", child


def test_activities_run_in_the_worker_processes_and_spread_over_them(host: InProcessHost) -> None:
    workers = set(host.host.worker_pids)
    assert len(workers) == 2 and os.getpid() not in workers
    instance_id = start(host, "fan_out_pids", {"count": 8})
    status = host.wait_for_status(instance_id, timeout=60)
    assert status["runtimeStatus"] == "Completed", status
    assert set(status["output"]) == workers  # sync and async activities, both workers used


def test_http_functions_run_in_a_worker_with_the_request_and_response_intact(host: InProcessHost) -> None:
    pid = int(host.client.get("/api/pid").text)
    assert pid in host.host.worker_pids
    body = bytes(range(256))  # not UTF-8: must cross the process boundary unchanged
    response = host.client.post("/api/echo/item-7?q=yes", content=body, headers={"X-Custom": "hello, world"})
    assert response.status_code == 201
    assert response.headers["content-type"] == "application/json"
    assert int(response.headers["x-served-by"]) in host.host.worker_pids
    assert response.json() == {"method": "POST", "item": "item-7", "q": "yes", "header": "hello, world",
                               "body_hex": body.hex()}


def test_workers_see_how_many_of_them_there_are(host: InProcessHost) -> None:
    """As on Azure, FUNCTIONS_WORKER_PROCESS_COUNT is set for the app (e.g. to refuse per-process state)."""
    assert host.client.get("/api/worker-count").text == "2"


def test_a_durable_client_in_a_worker_drives_the_host(host: InProcessHost) -> None:
    response = host.client.post("/api/start/fan_out_pids", json={"count": 2})
    assert response.status_code == 202, response.text
    status = host.wait_for_status(response.json()["id"], timeout=60)
    assert status["runtimeStatus"] == "Completed"


def test_failures_read_the_same_as_in_process(host: InProcessHost) -> None:
    assert host.client.get("/api/boom").status_code == 500
    assert host.client.get("/api/pid").status_code == 200  # the worker keeps serving
    status = host.wait_for_status(start(host, "failing", {}), timeout=60)
    # The extension's failure text, as for an activity run in the host process.
    assert status["output"].startswith("Activity function 'fail' failed:  ValueError: boom")


def test_a_worker_that_dies_mid_activity_is_replaced_and_the_retry_succeeds(host: InProcessHost,
                                                                             tmp_path: Path) -> None:
    before = set(host.host.worker_pids)
    instance_id = start(host, "crash_then_retry", {"marker": str(tmp_path / "crashed")})
    status = host.wait_for_status(instance_id, timeout=60)
    assert status["runtimeStatus"] == "Completed", status
    crashed = status["output"]["crashed_pid"]
    assert crashed in before and status["output"]["retried_pid"] != crashed
    wait_until(lambda: len(host.host.worker_pids) == 2, "a replacement worker")
    assert crashed not in host.host.worker_pids


def test_stopping_the_host_stops_its_workers() -> None:
    with InProcessHost(APP, workers=2) as running:
        pids = running.host.worker_pids
        assert int(running.client.get("/api/pid").text) in pids
    assert all(gone(pid) for pid in pids)


def test_workers_leave_when_their_host_is_killed(tmp_path: Path) -> None:
    host = SubprocessHost(APP, state_path=tmp_path / "state.sqlite3", workers=1).start()
    try:
        worker = int(host.client.get("/api/pid").text)
        assert worker != host.pid
        os.kill(worker, 0)  # alive while its host is
        assert host.process is not None
        os.kill(host.pid, signal.SIGKILL)  # the host alone: it has no chance to stop anything
        host.process.wait()
        wait_until(lambda: gone(worker), "the orphaned worker to exit")
    finally:
        host.close()


def test_a_killed_test_host_takes_its_workers_with_it(tmp_path: Path) -> None:
    """`SubprocessHost.kill` is a crash of the whole instance: no worker lives on to finish what was in flight."""
    host = SubprocessHost(APP, state_path=tmp_path / "state.sqlite3", workers=1).start()
    try:
        worker = int(host.client.get("/api/pid").text)
        host.kill()
        assert gone(worker)  # at once, not after the worker noticed its host was gone
    finally:
        host.close()


def test_a_worker_that_cannot_load_the_app_fails_the_start_clearly() -> None:
    host = InProcessHost(APP, workers=1, env={"IMPORT_ONLY_IN_PID": str(os.getpid())})
    with pytest.raises(WorkerStartError, match="exited with code 2 while loading the app"):
        host.start()


@pytest.mark.parametrize(("raw", "expected"), [("", 0), ("0", 0), ("3", 3)])
def test_the_worker_count_setting(monkeypatch: pytest.MonkeyPatch, raw: str, expected: int) -> None:
    monkeypatch.setenv("FUNCTIONS_WORKER_PROCESS_COUNT", raw)
    assert worker_count_setting() == expected


@pytest.mark.parametrize("raw", ["two", "-1", "65"])
def test_a_bad_worker_count_setting_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("FUNCTIONS_WORKER_PROCESS_COUNT", raw)
    with pytest.raises(HostConfigError, match="FUNCTIONS_WORKER_PROCESS_COUNT"):
        worker_count_setting()


def test_sigint_to_the_process_group_leaves_the_workers_to_their_host(tmp_path: Path) -> None:
    """Ctrl-C reaches every process of the group; workers ignore it and stop when the host closes them."""
    host = SubprocessHost(APP, state_path=tmp_path / "state.sqlite3", workers=1).start()
    try:
        worker = int(host.client.get("/api/pid").text)
        os.kill(worker, signal.SIGINT)
        assert int(host.client.get("/api/pid").text) == worker  # still serving
    finally:
        host.stop()
    wait_until(lambda: gone(worker), "the worker to exit with its host")
