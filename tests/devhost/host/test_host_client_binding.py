"""The `durableClient` binding JSON and the links `create_check_status_response` derives from it (§2.1)."""

import httpx
import pytest

from devhost.http.client_binding import build_client_binding

pytestmark = pytest.mark.devhost_app("tests/devhost/apps/http_durable")


def test_binding_json_has_the_extension_shape() -> None:
    binding = build_client_binding("http://localhost:7071", task_hub="TestHubName").model_dump(by_alias=True)
    base = "http://localhost:7071/runtime/webhooks/durabletask"
    suffix = "taskHub=TestHubName&connection=Storage"
    assert binding == {
        "taskHubName": "TestHubName",
        "connectionName": None,
        "creationUrls": {
            "createNewInstancePostUri": f"{base}/orchestrators/{{functionName}}[/{{instanceId}}]?",
            "createAndWaitOnNewInstancePostUri": (
                f"{base}/orchestrators/{{functionName}}[/{{instanceId}}]"
                "?timeout={timeoutInSeconds}&pollingInterval={intervalInSeconds}&"
            ),
        },
        "managementUrls": {
            "id": "INSTANCEID",
            "statusQueryGetUri": f"{base}/instances/INSTANCEID?{suffix}",
            "sendEventPostUri": f"{base}/instances/INSTANCEID/raiseEvent/{{eventName}}?{suffix}",
            "terminatePostUri": f"{base}/instances/INSTANCEID/terminate?reason={{text}}&{suffix}",
            "rewindPostUri": f"{base}/instances/INSTANCEID/rewind?reason={{text}}&{suffix}",
            "purgeHistoryDeleteUri": f"{base}/instances/INSTANCEID?{suffix}",
            "restartPostUri": f"{base}/instances/INSTANCEID/restart?{suffix}",
            "suspendPostUri": f"{base}/instances/INSTANCEID/suspend?reason={{text}}&{suffix}",
            "resumePostUri": f"{base}/instances/INSTANCEID/resume?reason={{text}}&{suffix}",
        },
        "baseUrl": base,
        "requiredQueryStringParameters": "",
        "rpcBaseUrl": "http://localhost:7071/durabletask/",
        "httpBaseUrl": None,
    }


def test_function_receives_the_binding_of_this_host(devhost, devhost_client: httpx.Client) -> None:
    binding = devhost_client.get("/api/binding").json()
    assert binding["rpcBaseUrl"] == f"{devhost.base_url}/durabletask/"
    assert binding["baseUrl"] == f"{devhost.base_url}/runtime/webhooks/durabletask"
    assert binding["taskHubName"] == "TestHubName"


def test_create_check_status_response(devhost, devhost_client: httpx.Client) -> None:
    response = devhost_client.post("/api/orchestrators/hello_sequence/check-1")
    assert response.status_code == 202
    assert response.headers["retry-after"] == "10"
    body = response.json()
    base = f"{devhost.base_url}/runtime/webhooks/durabletask/instances/check-1"
    assert body["id"] == "check-1"
    assert body["statusQueryGetUri"] == f"{base}?taskHub=TestHubName&connection=Storage"
    assert response.headers["location"] == body["statusQueryGetUri"]
    assert body["rewindPostUri"] == f"{base}/rewind?reason={{text}}&taskHub=TestHubName&connection=Storage"
    assert set(body) == {
        "id", "statusQueryGetUri", "sendEventPostUri", "terminatePostUri", "rewindPostUri", "purgeHistoryDeleteUri",
        "restartPostUri", "suspendPostUri", "resumePostUri",
    }
    # The links work as given.
    devhost.wait_for_status("check-1")
    assert httpx.get(body["statusQueryGetUri"]).json()["runtimeStatus"] == "Completed"


def test_create_http_management_payload_keeps_the_binding_origin(devhost, devhost_client: httpx.Client) -> None:
    payload = devhost_client.post("/api/instances/some-id/payload").json()["result"]
    assert payload["id"] == "some-id"
    expected = f"{devhost.base_url}/runtime/webhooks/durabletask/instances/some-id?"
    assert payload["purgeHistoryDeleteUri"].startswith(expected)


def test_each_request_gets_the_binding_of_the_origin_it_was_sent_to(devhost, devhost_client: httpx.Client) -> None:
    """The host builds each distinct binding once (`functions.client_binding_json`): one per origin."""
    port = httpx.URL(devhost.base_url).port
    for _ in range(2):
        by_name = devhost_client.get("/api/binding", headers={"Host": f"localhost:{port}"}).json()
        by_address = devhost_client.get("/api/binding").json()
        assert by_name["baseUrl"] == f"http://localhost:{port}/runtime/webhooks/durabletask"
        assert by_address["baseUrl"] == f"{devhost.base_url}/runtime/webhooks/durabletask"
        assert by_name["rpcBaseUrl"] == by_address["rpcBaseUrl"] == f"{devhost.base_url}/durabletask/"
