"""devhost honours host.json as the Functions host and the Durable extension do (docs/devhost.md lists each key).

Real parts: the real SDK and `azure.functions` through devhost, real HTTP. Function timeouts are wall-clock on Azure,
so these tests use the shortest one the host accepts (1 s); durable timers use the virtual clock.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from devhost.execution import sync_thread_count
from devhost.http.host_config import HostConfig, HostConfigError, StorageProvider, parse_timespan
from devhost.protocol.timefmt import parse_iso
from devhost.testing import InProcessHost

APPS = Path(__file__).resolve().parent.parent / "apps"
# Orchestration inputs go as a JSON string literal (what the Python client sends): the SDK's get_input() cannot read
# a bare number from a webhook body.


def app_with(tmp_path: Path, host_json: dict[str, Any], name: str = "host_settings") -> Path:
    app_dir = tmp_path / name
    shutil.copytree(APPS / name, app_dir)
    (app_dir / "host.json").write_text(json.dumps({"version": "2.0", **host_json}))
    return app_dir


def durable(**settings: Any) -> dict[str, Any]:
    return {"extensions": {"durableTask": settings}}


# ----- parsing: the host's defaults and validation -----


def test_function_timeout_defaults_and_forms() -> None:
    assert HostConfig.from_document({}).function_timeout == timedelta(minutes=30)  # not Consumption: 30 min
    assert HostConfig.from_document({"functionTimeout": "00:10:00"}).function_timeout == timedelta(minutes=10)
    assert HostConfig.from_document({"functionTimeout": "-1"}).function_timeout is None  # unbounded
    assert HostConfig.from_document({"FunctionTimeout": "1.02:00:00"}).function_timeout == timedelta(days=1, hours=2)
    assert parse_timespan("00:00:01.5") == timedelta(seconds=1.5)
    with pytest.raises(HostConfigError, match="FunctionTimeout must be greater than 00:00:01"):
        HostConfig.from_document({"functionTimeout": "00:00:00.5"})
    with pytest.raises(HostConfigError, match="functionTimeout"):
        HostConfig.from_document({"functionTimeout": "ten minutes"})


def test_durable_concurrency_and_provider_settings() -> None:
    config = HostConfig.from_document(durable(maxConcurrentActivityFunctions=3, maxConcurrentOrchestratorFunctions=2,
                                              storageProvider={"type": "AzureManaged"}))
    assert (config.max_concurrent_activities, config.max_concurrent_orchestrators) == (3, 2)
    assert config.storage_provider == StorageProvider.AZURE_MANAGED
    assert HostConfig.from_document({}).storage_provider == StorageProvider.AZURE_STORAGE
    assert HostConfig.default_concurrency() == 10 * (os.cpu_count() or 1)  # the extension's default
    with pytest.raises(HostConfigError, match="MaxConcurrentActivityFunctions must be a positive integer value"):
        HostConfig.from_document(durable(maxConcurrentActivityFunctions=0))
    with pytest.raises(HostConfigError, match=r"storageProvider\.type 'cosmos'"):
        HostConfig.from_document(durable(storageProvider={"type": "cosmos"}))


def test_the_repository_host_json_is_understood() -> None:
    os.environ.setdefault("TASKHUB_NAME", "hub")
    config = HostConfig.load(Path(__file__).resolve().parents[3])
    assert config.storage_provider == StorageProvider.AZURE_MANAGED
    assert config.function_timeout == timedelta(minutes=10)
    assert (config.max_concurrent_activities, config.max_concurrent_orchestrators) == (20, 20)


def test_sync_thread_pool_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHON_THREADPOOL_THREAD_COUNT", raising=False)
    assert sync_thread_count() == min(32, (os.cpu_count() or 1) + 4)  # ThreadPoolExecutor's default, as the worker
    monkeypatch.setenv("PYTHON_THREADPOOL_THREAD_COUNT", "3")
    assert sync_thread_count() == 3
    monkeypatch.setenv("PYTHON_THREADPOOL_THREAD_COUNT", "0")  # invalid: the worker warns and reverts
    assert sync_thread_count() == min(32, (os.cpu_count() or 1) + 4)


# ----- functionTimeout -----


def test_an_activity_past_function_timeout_is_a_failed_task(tmp_path: Path) -> None:
    with InProcessHost(app_with(tmp_path, {"functionTimeout": "00:00:01"})) as host:
        started = host.client.post("/runtime/webhooks/durabletask/orchestrators/call_sleepy", json=str(5))
        status = host.wait_for_status(started.json()["id"])
    assert status["runtimeStatus"] == "Completed"
    assert status["output"].startswith(
        "caught: Activity function 'sleepy' failed: Timeout value of 00:00:01 was exceeded by function: "
        "Functions.sleepy"
    )


def test_an_activity_within_function_timeout_succeeds(tmp_path: Path) -> None:
    with InProcessHost(app_with(tmp_path, {"functionTimeout": "00:01:00"})) as host:
        started = host.client.post("/runtime/webhooks/durabletask/orchestrators/call_sleepy", json=str(0))
        assert host.wait_for_status(started.json()["id"])["output"] == "woke up"


def test_an_http_function_past_function_timeout_gets_500(tmp_path: Path) -> None:
    with InProcessHost(app_with(tmp_path, {"functionTimeout": "00:00:01"})) as host:
        response = host.client.get("/api/slow", params={"seconds": 5})
        assert (response.status_code, response.text) == (500, "")
        assert host.client.get("/api/ping").text == "pong"  # the host goes on


def test_a_timed_out_activity_restarts_its_worker_process(tmp_path: Path) -> None:
    with InProcessHost(app_with(tmp_path, {"functionTimeout": "00:00:01"}), workers=1) as host:
        before = host.host.worker_pids
        started = host.client.post("/runtime/webhooks/durabletask/orchestrators/call_sleepy", json=str(30))
        status = host.wait_for_status(started.json()["id"])
        assert "Timeout value of 00:00:01 was exceeded" in status["output"]
        again = host.client.post("/runtime/webhooks/durabletask/orchestrators/call_sleepy", json=str(0))
        assert host.wait_for_status(again.json()["id"])["output"] == "woke up"  # served by the replacement
        assert host.host.worker_pids and host.host.worker_pids != before


# ----- concurrency: maxConcurrentActivityFunctions and the worker's thread pool -----


def peak_while_held(host: InProcessHost, fan_out: int, limit: int) -> tuple[int, int]:
    """Start `fan_out` gated activities; wait until `limit` run; see whether one more starts; open the gate."""
    started = host.client.post("/runtime/webhooks/durabletask/orchestrators/fan_out_held", json=str(fan_out))
    assert host.client.get("/api/running", params={"atLeast": limit}).json()["running"] == limit
    beyond = host.client.get("/api/running", params={"atLeast": limit + 1, "within": 1}).json()["running"]
    host.client.post("/api/gate")
    assert host.wait_for_status(started.json()["id"])["output"] == sum(range(fan_out))
    return beyond, host.client.get("/api/peak").json()["peak"]


def test_max_concurrent_activity_functions_bounds_running_activities(tmp_path: Path) -> None:
    app_dir = app_with(tmp_path, durable(maxConcurrentActivityFunctions=2))
    with InProcessHost(app_dir, env={"PYTHON_THREADPOOL_THREAD_COUNT": "8"}) as host:
        assert peak_while_held(host, fan_out=5, limit=2) == (2, 2)


def test_python_threadpool_thread_count_bounds_sync_functions(tmp_path: Path) -> None:
    app_dir = app_with(tmp_path, durable(maxConcurrentActivityFunctions=10))
    with InProcessHost(app_dir, env={"PYTHON_THREADPOOL_THREAD_COUNT": "3"}) as host:
        assert peak_while_held(host, fan_out=5, limit=3) == (3, 3)


# ----- the storage provider decides the trigger payload's long-timer fields -----


def timer_events(host: InProcessHost, days: int) -> tuple[Any, list[dict[str, Any]]]:
    started = host.client.post("/runtime/webhooks/durabletask/orchestrators/wait_days", json=str(days))
    instance_id = started.json()["id"]
    host.wait_until_idle(skip_timers=True)
    status = host.get_status(instance_id, show_history=True)
    assert status is not None
    return status["output"], [e for e in status["historyEvents"] if e["EventType"] == "TimerCreated"]


def test_long_timers_are_chunked_under_azure_storage(tmp_path: Path) -> None:
    with InProcessHost(app_with(tmp_path, durable(storageProvider={"type": "AzureStorage"}))) as host:
        output, timers = timer_events(host, 7)
    assert output == "waited 7 days"
    # The SDK's LongTimerTask with Azure Storage's fields: a 3-day chunk, then (4 days <= the 6-day maximum) the rest.
    assert len(timers) == 2
    assert gap_days(timers[0]) == 3 and gap_days(timers[1]) == 4


def test_long_timers_are_one_timer_under_the_durable_task_scheduler(tmp_path: Path) -> None:
    with InProcessHost(app_with(tmp_path, durable(storageProvider={"type": "azureManaged"}))) as host:
        output, timers = timer_events(host, 7)
    assert output == "waited 7 days"
    assert len(timers) == 1 and gap_days(timers[0]) == 7  # DTS sends the fields as 00:00:00: the SDK never chunks


def gap_days(timer: dict[str, Any]) -> float:
    return (parse_iso(timer["FireAt"]) - parse_iso(timer["Timestamp"])) / timedelta(days=1)


# ----- devhost's status tells its engine apart from the configured backend -----


def test_host_status_names_the_engine_and_the_settings_applied(tmp_path: Path) -> None:
    app_dir = app_with(tmp_path, {"functionTimeout": "00:05:00", **durable(
        hubName="statushub", maxConcurrentActivityFunctions=3, storageProvider={"type": "azureManaged"})})
    with InProcessHost(app_dir) as host:
        status = host.client.get("/admin/host/status").json()
        assert os.environ["DEVHOST_ENGINE"] == "devhost"  # set for the app before it loads
    assert status == {
        "state": "Running",
        "worker": "devhost-inprocess",
        "functionTimeout": "00:05:00",
        "retry": None,
        "durable": {"engine": "devhost", "configuredBackend": "azureManaged", "taskHub": "statushub",
                    "maxConcurrentActivityFunctions": 3,
                    "maxConcurrentOrchestratorFunctions": HostConfig.default_concurrency(),
                    "maxConcurrentEntityFunctions": HostConfig.default_concurrency()},
    }


# ----- a hang or crash in orchestrator code never takes devhost down -----

WEBHOOK = "/runtime/webhooks/durabletask/orchestrators/"


def start(host: InProcessHost, name: str) -> str:
    response = host.client.post(WEBHOOK + name)
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def test_a_hanging_orchestrator_episode_is_aborted_and_retried_while_the_host_goes_on(tmp_path: Path) -> None:
    app_dir = app_with(tmp_path, {"functionTimeout": "00:00:01"})
    with InProcessHost(app_dir, env={"HANG_SECONDS": "4"}) as host:
        stuck = start(host, "hangs_once")
        assert host.wait_for_status(start(host, "hello"))["output"] == "hello"  # others run during the hang
        assert host.client.get("/api/ping").text == "pong"
        host.wait_until_idle()  # the hung episode passed functionTimeout and was abandoned
        # Retryable, as after the extension's SessionAbortedException: the first episode never committed, so the
        # instance is still Pending (as on Azure), not Failed.
        assert host.get_status(stuck)["runtimeStatus"] == "Pending"
        host.advance(1)  # the redelivery's back-off (virtual time)
        assert host.wait_for_status(stuck)["output"] == "after the hang"


def test_an_orchestrator_that_never_returns_costs_a_worker_restart_not_the_host(tmp_path: Path) -> None:
    with InProcessHost(app_with(tmp_path, {"functionTimeout": "00:00:02"}), workers=1) as host:
        first_worker = host.host.worker_pids
        looping = start(host, "loops_forever")
        assert host.wait_for_status(start(host, "hello"))["output"] == "hello"
        host.wait_until_idle()  # timed out: the worker running it was killed and replaced
        assert host.host.worker_pids != first_worker
        assert host.get_status(looping)["runtimeStatus"] == "Pending"
        assert host.client.get("/api/ping").text == "pong"
        assert host.client.post(f"/runtime/webhooks/durabletask/instances/{looping}/terminate").status_code == 202
        # The terminate is processed with the ExecutionStarted it waits for, once that is redelivered after the
        # aborted episode's back-off (no history without ExecutionStarted); the orchestrator does not run again.
        host.advance(1)
        assert host.wait_for_status(looping)["runtimeStatus"] == "Terminated"


def test_an_orchestrator_that_kills_its_process_is_retried_and_the_host_goes_on(tmp_path: Path) -> None:
    with InProcessHost(app_with(tmp_path, {"functionTimeout": "00:01:00"}), workers=1) as host:
        dying = start(host, "exits_process")
        host.wait_until_idle()  # the worker exited mid-episode: the episode is abandoned, the worker replaced
        assert host.get_status(dying)["runtimeStatus"] == "Pending"
        assert host.wait_for_status(start(host, "hello"))["output"] == "hello"
        assert host.client.get("/api/ping").text == "pong"
        host.advance(1)  # redelivered: it kills its worker again, and the host still serves
        host.wait_until_idle()
        assert host.get_status(dying)["runtimeStatus"] == "Pending"
        assert host.wait_for_status(start(host, "hello"))["output"] == "hello"


# ----- host.json retry: validated, and (as on Azure) applied to no HTTP or Durable trigger -----

RETRY = {"retry": {"strategy": "fixedDelay", "maxRetryCount": 3, "delayInterval": "00:00:01"}}


def test_the_retry_policy_is_validated_as_the_host_does() -> None:
    policy = HostConfig.from_document(RETRY).retry
    assert policy is not None and (policy.max_retry_count, policy.delay_interval) == (3, timedelta(seconds=1))
    with pytest.raises(HostConfigError, match=r"retry\.delayInterval is required"):
        HostConfig.from_document({"retry": {"strategy": "fixedDelay", "maxRetryCount": 3}})
    with pytest.raises(HostConfigError, match=r"retry\.strategy"):
        HostConfig.from_document({"retry": {"strategy": "sometimes", "maxRetryCount": 3}})


def test_host_retry_does_not_retry_http_or_activity_functions(tmp_path: Path) -> None:
    with InProcessHost(app_with(tmp_path, RETRY)) as host:
        assert host.client.post("/api/failing").status_code == 500
        assert host.client.get("/api/failing").json() == {"calls": 1}
        assert host.wait_for_status(start(host, "call_failing"))["output"] == "failed once"
        host.advance(60)  # no retry is due at any time
        assert host.client.get("/api/failing").json() == {"calls": 2}
        assert host.client.get("/admin/host/status").json()["retry"] == {
            "strategy": "fixedDelay", "max_retry_count": 3, "delay_interval": "PT1S"}


# ----- function keys, when asked -----

KEYS = {"masterKey": "master-secret", "hostKeys": {"default": "host-secret"},
        "functionKeys": {"Secured": {"default": "secured-secret"}, "ping": {"default": "ping-secret"}},
        "systemKeys": {"durabletask_extension": "durable-secret"}}


def keys_file(tmp_path: Path, keys: dict[str, Any]) -> Path:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(keys))
    return path


def test_without_a_keys_file_no_key_is_checked(tmp_path: Path) -> None:
    with InProcessHost(app_with(tmp_path, {})) as host:  # as under `func start`
        assert host.client.get("/api/secured").text == "function level"
        assert host.client.get("/api/admin-only").text == "admin level"


def test_with_a_keys_file_auth_levels_are_enforced_as_on_azure(tmp_path: Path) -> None:
    with InProcessHost(app_with(tmp_path, {}), function_keys=keys_file(tmp_path, KEYS)) as host:
        client = host.client
        assert client.get("/api/ping").text == "pong"  # anonymous: no key needed
        for missing_or_wrong in ({}, {"x-functions-key": "nope"}, {"x-functions-key": "ping-secret"}):
            response = client.get("/api/secured", headers=missing_or_wrong)
            assert (response.status_code, response.text) == (401, "")
        assert client.get("/api/secured", headers={"x-functions-key": "secured-secret"}).status_code == 200
        assert client.get("/api/secured", params={"code": "host-secret"}).status_code == 200
        assert client.get("/api/secured", params={"code": "master-secret"}).status_code == 200
        assert client.get("/api/admin-only", params={"code": "host-secret"}).status_code == 401
        assert client.get("/api/admin-only", headers={"x-functions-key": "master-secret"}).text == "admin level"
        # The host reads the first value of a repeated key header, and the header wins when it is there at all.
        two = [("x-functions-key", "secured-secret"), ("x-functions-key", "nope")]
        assert client.get("/api/secured", headers=two).status_code == 200
        assert client.get("/api/secured", headers=two[::-1]).status_code == 401
        assert client.get("/api/secured", params=[("code", "host-secret"), ("code", "nope")]).status_code == 200
        assert client.get("/api/secured", headers={"x-functions-key": ""}, params={"code": "host-secret"}
                          ).status_code == 401


def test_the_key_query_parameter_is_named_in_any_case_as_on_azure(tmp_path: Path) -> None:
    # The host's `request.Query` compares names ignoring case: `?Code=` is the key, and names differing only in case
    # are one parameter, its first value in URL order the one read.
    with InProcessHost(app_with(tmp_path, {}), function_keys=keys_file(tmp_path, KEYS)) as host:
        client = host.client
        for name in ("Code", "CODE", "cOdE"):
            assert client.get("/api/secured", params={name: "host-secret"}).status_code == 200, name
            assert client.get("/api/secured", params={name: "nope"}).status_code == 401, name
        assert client.get("/api/secured", params=[("CODE", "host-secret"), ("code", "nope")]).status_code == 200
        assert client.get("/api/secured", params=[("CODE", "nope"), ("code", "host-secret")]).status_code == 401
        assert client.get("/api/secured", params=[("Code", ""), ("code", "host-secret")]).status_code == 401
        assert client.post(WEBHOOK + "hello", params={"Code": "durable-secret"}).status_code == 202


def test_an_unusable_keys_file_stops_the_host_with_its_name(tmp_path: Path) -> None:
    with pytest.raises(HostConfigError, match=r"keys\.json: cannot use this function keys file"):
        InProcessHost(app_with(tmp_path, {}), function_keys=keys_file(tmp_path, {"hostKeys": {}})).start()


def test_an_entity_that_kills_its_worker_process_is_redelivered_and_the_host_goes_on(tmp_path: Path) -> None:
    with InProcessHost(app_with(tmp_path, {}), workers=1) as host:
        entity = "/runtime/webhooks/durabletask/entities/crasher/"
        assert host.client.post(entity + "k1", params={"op": "crash"}).status_code == 202
        host.wait_until_idle()  # the batch's worker died: an internal error, the batch is kept for a retry
        assert host.client.get(entity + "k1").status_code == 404  # nothing committed
        assert host.client.post(entity + "k2", params={"op": "add"}).status_code == 202
        host.wait_until_idle()
        assert host.client.get(entity + "k2").json() == 1  # other entities, on the replacement worker
        assert host.client.get("/api/ping").text == "pong"


def test_with_a_keys_file_the_durable_webhooks_need_the_extension_key_that_the_links_carry(tmp_path: Path) -> None:
    with InProcessHost(app_with(tmp_path, {}), function_keys=keys_file(tmp_path, KEYS)) as host:
        client = host.client
        assert client.post(WEBHOOK + "hello").status_code == 401
        assert client.post(WEBHOOK + "hello", params={"code": "host-secret"}).status_code == 401
        started = client.post(WEBHOOK + "hello", params={"code": "durable-secret"})
        assert started.status_code == 202
        assert "code=durable-secret" in started.json()["statusQueryGetUri"]
        # The client binding carries the key too: the SDK's check-status links work as they are.
        links = client.post("/api/start-hello").json()
        assert "code=durable-secret" in links["statusQueryGetUri"]
        host.wait_for_status(links["id"])
        assert client.get(links["statusQueryGetUri"]).json()["output"] == "hello"
        assert client.get(links["statusQueryGetUri"].replace("code=durable-secret", "code=x")).status_code == 401


def test_a_poll_free_provider_waits_for_the_timeout_whatever_the_polling_interval(tmp_path: Path) -> None:
    """Netherite's provider supports a poll-free wait: the start handler replaces pollingInterval with timeout, so
    a longer pollingInterval is accepted and a timeout alone waits (Azure Storage answers 202 at once for it)."""
    app_dir = app_with(tmp_path, durable(storageProvider={"type": "Netherite"}), name="http_durable")
    with InProcessHost(app_dir) as host:
        base = "/runtime/webhooks/durabletask/orchestrators/echo_input"
        waited = host.client.post(base, params={"timeout": "10", "pollingInterval": "20"}, json={"n": 1}, timeout=30)
        assert (waited.status_code, waited.json()) == (200, {"n": 1})
        alone = host.client.post(base, params={"timeout": "10"}, json={"n": 2}, timeout=30)
        assert (alone.status_code, alone.json()) == (200, {"n": 2})
        assert host.client.post(base, params={"pollingInterval": "1"}, json={"n": 3}).status_code == 202
