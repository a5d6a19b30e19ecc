"""The unmodified SDK `DurableOrchestrationClient`, called from HTTP triggers, against devhost's RPC API (§2.2)."""

import re

import httpx
import pytest

from devhost.testing import InProcessHost

pytestmark = pytest.mark.devhost_app("tests/devhost/apps/http_durable")


def start(client: httpx.Client, name: str, instance_id: str = "", **kwargs) -> str:
    response = client.post(f"/api/orchestrators/{name}/{instance_id}".rstrip("/"), **kwargs)
    assert response.status_code == 202, response.text
    return response.json()["id"]


def sdk_status(client: httpx.Client, instance_id: str, **params: str) -> dict:
    response = client.get(f"/api/status/{instance_id}", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def manage(client: httpx.Client, instance_id: str, operation: str, **kwargs) -> httpx.Response:
    return client.post(f"/api/instances/{instance_id}/{operation}", **kwargs)


def test_start_new_with_generated_id_runs_to_completion(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    instance_id = start(devhost_client, "hello_sequence")
    assert re.fullmatch(r"[0-9a-f]{32}", instance_id)
    status = devhost.wait_for_status(instance_id)
    assert status["runtimeStatus"] == "Completed"
    assert status["output"] == ["Hello Tokyo!", "Hello Seattle!", "Hello London!"]


def test_start_new_with_explicit_id_and_input(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    assert start(devhost_client, "echo_input", "explicit-1", json={"n": 6}) == "explicit-1"
    devhost.wait_for_status("explicit-1")
    status = sdk_status(devhost_client, "explicit-1", input="1")
    assert status["runtimeStatus"] == "Completed"
    assert status["output"] == {"n": 6}
    # The client posts df_dumps(input) as a JSON string literal, so the status input is that string (§1.6).
    assert status["input"] == '{"n": 6}'
    assert status["truthy"] is True


def test_an_activity_with_the_client_binding_starts_an_orchestration(
    devhost: InProcessHost, devhost_client: httpx.Client
) -> None:
    start(devhost_client, "start_another", "starter-1", json={"instance_id": "started-by-activity", "n": 7})
    devhost.wait_for_status("starter-1")
    assert devhost.get_status("starter-1")["output"] == "started-by-activity"
    devhost.wait_for_status("started-by-activity")
    assert devhost.get_status("started-by-activity")["output"] == {"instance_id": "started-by-activity", "n": 7}


def test_start_unknown_orchestrator_raises_the_extension_message(devhost_client: httpx.Client) -> None:
    response = devhost_client.post("/api/orchestrators/no_such_orchestrator")
    assert response.status_code == 599
    assert "no_such_orchestrator" in response.json()["error"]


def test_start_with_a_running_instance_id_is_refused(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    start(devhost_client, "wait_event", "dup-1")
    devhost.wait_for_status("dup-1", "Running")
    response = devhost_client.post("/api/orchestrators/wait_event/dup-1")
    assert response.status_code == 599
    devhost.wait_until_idle()
    assert devhost.get_status("dup-1")["runtimeStatus"] == "Running"


def test_get_status_of_unknown_instance_is_falsy(devhost_client: httpx.Client) -> None:
    status = sdk_status(devhost_client, "never-started")
    assert status == {"truthy": False, "runtime_status": None}


def test_get_status_with_history(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    instance_id = start(devhost_client, "hello_sequence", json=["Oslo"])
    devhost.wait_for_status(instance_id)
    status = sdk_status(devhost_client, instance_id, history="1", output="1")
    events = status["historyEvents"]
    # The SDK's kwarg is `history`, so the events land in the `historyEvents` attribute and `history` stays unset.
    assert status["history"] is None
    assert [e["EventType"] for e in events] == ["ExecutionStarted", "TaskCompleted", "ExecutionCompleted"]
    completed = events[1]
    assert completed["FunctionName"] == "say_hello"
    assert completed["Result"] == "Hello Oslo!"
    assert "ScheduledTime" in completed
    assert all("EventId" not in e and "IsPlayed" not in e for e in events)
    without = sdk_status(devhost_client, instance_id)
    assert without["historyEvents"] is None
    # show_input=False is not sent at all (only truthy flags are), and the server's showInput defaults to true.
    assert without["input"] == '["Oslo"]'


def test_status_by_filters_and_all(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    start(devhost_client, "echo_input", "filter-a1", json=1)
    start(devhost_client, "echo_input", "filter-a2", json=2)
    start(devhost_client, "wait_event", "filter-b1")
    devhost.wait_for_status("filter-a1")
    devhost.wait_for_status("filter-a2")
    devhost.wait_for_status("filter-b1", "Running")
    everything = devhost_client.get("/api/statuses").json()
    assert {"filter-a1", "filter-a2", "filter-b1"} <= set(everything)
    assert devhost_client.get("/api/statuses", params={"prefix": "filter-a"}).json() == ["filter-a1", "filter-a2"]
    running = devhost_client.get("/api/statuses", params={"status": "Running", "prefix": "filter-"}).json()
    assert running == ["filter-b1"]
    future = devhost_client.get("/api/statuses", params={"from": "2999-01-01T00:00:00+00:00"}).json()
    assert future == []


def test_raise_event_from_the_client_delivers_a_str(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    start(devhost_client, "wait_event", "event-1")
    devhost.wait_for_status("event-1", "Running")
    response = manage(devhost_client, "event-1", "raise", params={"event": "Approval"}, json={"ok": 1})
    assert response.status_code == 200, response.text
    status = devhost.wait_for_status("event-1")
    # Known SDK quirk (§1.6): the client double-encodes the payload, the orchestrator sees a str.
    assert status["output"] == {"payload": '{"ok": 1}', "type": "str"}


def test_raise_event_errors_reach_the_client(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    unknown = manage(devhost_client, "nobody", "raise", params={"event": "Approval"}, json=1)
    assert unknown.json() == {"error": "No instance with ID nobody found."}
    instance_id = start(devhost_client, "echo_input", json=0)
    devhost.wait_for_status(instance_id)
    gone = manage(devhost_client, instance_id, "raise", params={"event": "Approval"}, json=1)
    assert gone.json() == {"error": f"Instance with ID {instance_id} is gone: either completed or failed"}


def test_terminate(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    start(devhost_client, "wait_event", "term-1")
    devhost.wait_for_status("term-1", "Running")
    assert manage(devhost_client, "term-1", "terminate", params={"reason": "enough"}).status_code == 200
    status = devhost.wait_for_status("term-1")
    assert (status["runtimeStatus"], status["output"]) == ("Terminated", "enough")
    # Terminating a terminated instance is a 410, which the client accepts silently.
    assert manage(devhost_client, "term-1", "terminate").json() == {"result": None}
    missing = manage(devhost_client, "missing", "terminate")
    assert missing.json() == {"error": "No instance with ID 'missing' found."}


def test_suspend_and_resume(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    start(devhost_client, "wait_event", "susp-1")
    devhost.wait_for_status("susp-1", "Running")
    assert manage(devhost_client, "susp-1", "suspend").status_code == 200
    devhost.wait_for_status("susp-1", "Suspended")
    # An event raised while suspended is held until the resume.
    manage(devhost_client, "susp-1", "raise", params={"event": "Approval"}, json="held")
    devhost.wait_until_idle()
    assert devhost.get_status("susp-1")["runtimeStatus"] == "Suspended"
    assert manage(devhost_client, "susp-1", "resume").status_code == 200
    status = devhost.wait_for_status("susp-1")
    assert status["output"] == {"payload": '"held"', "type": "str"}


def test_purge_one_instance(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    instance_id = start(devhost_client, "echo_input", json="x")
    devhost.wait_for_status(instance_id)
    assert manage(devhost_client, instance_id, "purge").json() == {"result": 1}
    assert devhost.get_status(instance_id) is None
    assert manage(devhost_client, instance_id, "purge").json() == {"result": 0}


def test_purge_by_filter(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    done = start(devhost_client, "echo_input", json="x")
    devhost.wait_for_status(done)
    start(devhost_client, "wait_event", "purge-running")
    devhost.wait_for_status("purge-running", "Running")
    missing_from = devhost_client.delete("/api/purge")
    assert "created_time_from is required" in missing_from.json()["error"]
    deleted = devhost_client.delete("/api/purge", params={"from": "2000-01-01T00:00:00+00:00", "status": "Completed"})
    assert deleted.json() == {"deleted": 1}
    assert devhost.get_status(done) is None
    assert devhost.get_status("purge-running") is not None
    nothing = devhost_client.delete("/api/purge", params={"from": "2000-01-01T00:00:00+00:00", "status": "Completed"})
    assert nothing.json() == {"deleted": 0}


def test_restart_returns_the_check_status_payload(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    start(devhost_client, "echo_input", "restart-1", json={"again": True})
    devhost.wait_for_status("restart-1")
    result = manage(devhost_client, "restart-1", "restart").json()["result"]
    # SDK quirk: restart returns the whole check-status dict of the new instance.
    assert isinstance(result, dict)
    assert result["id"] != "restart-1"
    assert devhost.wait_for_status(result["id"])["output"] == {"again": True}
    same = manage(devhost_client, "restart-1", "restart", params={"new": "false"}).json()["result"]
    assert same["id"] == "restart-1"
    assert devhost.wait_for_status("restart-1")["output"] == {"again": True}


def test_wait_for_completion_returns_the_output(devhost_client: httpx.Client) -> None:
    response = devhost_client.post("/api/start-and-wait/hello_sequence", json=["Rome"])
    assert response.status_code == 200
    assert response.json() == ["Hello Rome!"]


def test_wait_for_completion_of_a_failed_instance_is_500(devhost_client: httpx.Client) -> None:
    response = devhost_client.post("/api/start-and-wait/failing")
    assert response.status_code == 500
    body = response.json()
    assert body["runtimeStatus"] == "Failed"
    assert "Activity function 'explode' failed:  ValueError: boom" in body["output"]


def test_wait_for_completion_times_out_into_check_status(devhost_client: httpx.Client) -> None:
    response = devhost_client.post("/api/start-and-wait/wait_event", params={"timeout_ms": "200", "retry_ms": "50"})
    assert response.status_code == 202
    assert response.headers["location"] == response.json()["statusQueryGetUri"]


def test_entity_signal_and_read(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    assert devhost_client.get("/api/entities/Counter/c1").json() == {"exists": False, "state": None}
    assert devhost_client.post("/api/entities/Counter/c1", params={"op": "add"}, json=5).status_code == 202
    assert devhost_client.post("/api/entities/Counter/c1", params={"op": "add"}, json=2).status_code == 202
    devhost.wait_until_idle()
    assert devhost_client.get("/api/entities/Counter/c1").json() == {"exists": True, "state": 7}


def test_signal_unknown_entity_fails_in_the_client(devhost_client: httpx.Client) -> None:
    response = devhost_client.post("/api/entities/Nope/k", params={"op": "add"}, json=1)
    assert response.json() == {"error": "The operation failed with an unexpected status code 400"}


def test_http_function_waits_on_entity_state_while_batches_run(devhost_client: httpx.Client) -> None:
    """AgentFunctionApp holds the request and polls read_entity_state: HTTP and entity work must run concurrently."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(3) as pool:
        calls = [pool.submit(devhost_client.post, f"/api/agents/{key}/run", params={"amount": "2"})
                 for key in ("s1", "s2", "s3")]
        assert [c.result(timeout=30).json() for c in calls] == [{"state": 2}] * 3
    assert devhost_client.post("/api/agents/s1/run", params={"amount": "5"}).json() == {"state": 7}


def test_rewind(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    assert manage(devhost_client, "nobody", "rewind").json() == {"error": "No instance with ID nobody found."}
    done = start(devhost_client, "echo_input", json={"n": 1})
    devhost.wait_for_status(done)
    refused = manage(devhost_client, done, "rewind").json()["error"]
    assert 'only orchestrations in the "Failed" state can be rewound' in refused
    failed = start(devhost_client, "failing")
    assert devhost.wait_for_status(failed)["runtimeStatus"] == "Failed"
    assert manage(devhost_client, failed, "rewind").json() == {"result": None}
