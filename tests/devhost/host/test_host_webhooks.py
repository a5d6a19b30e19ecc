"""The Durable HTTP API called directly: same handlers on the RPC base and the public webhook base (§2.2, E.5.2)."""

import httpx
import pytest

from devhost.testing import InProcessHost

pytestmark = pytest.mark.devhost_app("tests/devhost/apps/http_durable")

BASES = ["/runtime/webhooks/durabletask", "/durabletask"]


@pytest.fixture(params=BASES, ids=["webhook", "rpc"])
def api(request: pytest.FixtureRequest, devhost_client: httpx.Client) -> "Api":
    return Api(devhost_client, request.param)


class Api:
    def __init__(self, client: httpx.Client, base: str) -> None:
        self.client = client
        self.base = base

    def __call__(self, method: str, path: str, **kwargs) -> httpx.Response:
        return self.client.request(method, self.base + path, **kwargs)

    def start(self, name: str, instance_id: str = "", **kwargs) -> str:
        response = self("POST", f"/orchestrators/{name}/{instance_id}".rstrip("/"), **kwargs)
        assert response.status_code == 202, response.text
        return response.json()["id"]


def test_start_with_a_json_body_keeps_the_object(devhost: InProcessHost, api: Api) -> None:
    instance_id = api.start("echo_input", json={"n": 6})
    status = devhost.wait_for_status(instance_id)
    assert status["input"] == {"n": 6}
    assert status["output"] == {"n": 6}


def test_start_response_is_the_check_status_payload(devhost: InProcessHost, api: Api) -> None:
    response = api("POST", "/orchestrators/echo_input/hook-1")
    assert response.status_code == 202
    assert response.headers["retry-after"] == "10"
    body = response.json()
    assert set(body) == {
        "id", "statusQueryGetUri", "sendEventPostUri", "terminatePostUri", "purgeHistoryDeleteUri",
        "restartPostUri", "suspendPostUri", "resumePostUri",
    }
    assert response.headers["location"] == body["statusQueryGetUri"]
    assert body["statusQueryGetUri"].startswith(f"{devhost.base_url}/runtime/webhooks/durabletask/instances/hook-1?")


def test_start_errors(devhost: InProcessHost, api: Api) -> None:
    unknown = api("POST", "/orchestrators/nope")
    assert unknown.status_code == 400
    assert "nope" in unknown.json()["ExceptionMessage"]
    assert api("POST", "/orchestrators/echo_input", content=b"{bad", headers={"content-type": "application/json"}
               ).status_code == 400
    assert api("POST", "/orchestrators/echo_input/@bad").status_code == 400
    api.start("wait_event", "running-1")
    devhost.wait_for_status("running-1", "Running")
    assert api("POST", "/orchestrators/wait_event/running-1").status_code == 409
    assert api("GET", "/orchestrators/echo_input").status_code == 404


def test_start_and_wait_with_timeout_and_polling_interval(api: Api) -> None:
    done = api("POST", "/orchestrators/echo_input", params={"timeout": "10", "pollingInterval": "1"},
               json={"city": "Lima"})
    assert done.status_code == 200
    assert done.json() == {"city": "Lima"}
    pending = api("POST", "/orchestrators/wait_event", params={"timeout": "0.1", "pollingInterval": "0.05"})
    assert pending.status_code == 202
    assert "statusQueryGetUri" in pending.json()


def test_status_codes(devhost: InProcessHost, api: Api) -> None:
    assert api("GET", "/instances/unknown").status_code == 404
    assert api("GET", "/instances/unknown").content == b""
    api.start("wait_event", "status-running")
    devhost.wait_for_status("status-running", "Running")
    running = api("GET", "/instances/status-running")
    assert running.status_code == 202
    assert running.headers["retry-after"] == "5"
    assert running.headers["location"].endswith("/instances/status-running")
    body = running.json()
    assert body["runtimeStatus"] == "Running"
    assert body["customStatus"] == "waiting"
    assert len(body["createdTime"]) == len("2026-01-01T00:00:00Z")
    failed = api.start("failing")
    devhost.wait_for_status(failed)
    assert api("GET", f"/instances/{failed}").status_code == 200
    assert api("GET", f"/instances/{failed}", params={"returnInternalServerErrorOnFailure": "true"}).status_code == 500


def test_status_input_can_be_hidden(devhost: InProcessHost, api: Api) -> None:
    instance_id = api.start("echo_input", json={"x": [1]})
    devhost.wait_for_status(instance_id)
    assert api("GET", f"/instances/{instance_id}").json()["input"] == {"x": [1]}
    assert api("GET", f"/instances/{instance_id}", params={"showInput": "false"}).json()["input"] is None


def test_raise_event_status_codes_and_object_payload(devhost: InProcessHost, api: Api) -> None:
    assert api("POST", "/instances/nobody/raiseEvent/Approval", json={}).status_code == 404
    api.start("wait_event", "hook-event")
    devhost.wait_for_status("hook-event", "Running")
    not_json = api("POST", "/instances/hook-event/raiseEvent/Approval", content=b"x",
                   headers={"content-type": "text/plain"})
    assert not_json.status_code == 400
    assert not_json.json() == {"Message": "Only application/json request content is supported"}
    bad_json = api("POST", "/instances/hook-event/raiseEvent/Approval", content=b"{x",
                   headers={"content-type": "application/json"})
    assert bad_json.status_code == 400
    assert api("POST", "/instances/hook-event/raiseEvent/Approval", json={"ok": 1}).status_code == 202
    status = devhost.wait_for_status("hook-event")
    # Through the webhook the payload stays an object (the Python client's str quirk does not apply).
    assert status["output"] == {"payload": {"ok": 1}, "type": "dict"}
    assert api("POST", "/instances/hook-event/raiseEvent/Approval", json={}).status_code == 410


def test_terminate_suspend_resume_status_codes(devhost: InProcessHost, api: Api) -> None:
    for operation in ("terminate", "suspend", "resume"):
        assert api("POST", f"/instances/nobody/{operation}").status_code == 404
    api.start("wait_event", "hook-life")
    devhost.wait_for_status("hook-life", "Running")
    assert api("POST", "/instances/hook-life/suspend", params={"reason": "pause"}).status_code == 202
    devhost.wait_for_status("hook-life", "Suspended")
    assert api("POST", "/instances/hook-life/resume").status_code == 202
    devhost.wait_for_status("hook-life", "Running")
    assert api("POST", "/instances/hook-life/terminate", params={"reason": "stop now"}).status_code == 202
    assert devhost.wait_for_status("hook-life")["output"] == "stop now"
    for operation in ("terminate", "suspend", "resume"):
        assert api("POST", f"/instances/hook-life/{operation}").status_code == 410
    assert api("POST", "/instances/hook-life/frobnicate").status_code == 404
    assert api("PUT", "/instances/hook-life").status_code == 404


def test_purge_status_codes(devhost: InProcessHost, api: Api) -> None:
    assert api("DELETE", "/instances/nobody").status_code == 404
    api.start("wait_event", "purge-live")
    devhost.wait_for_status("purge-live", "Running")
    refused = api("DELETE", "/instances/purge-live")
    assert refused.status_code == 412
    assert "terminal state" in refused.json()
    done = api.start("echo_input", json={"n": 1})
    devhost.wait_for_status(done)
    purged = api("DELETE", f"/instances/{done}")
    assert (purged.status_code, purged.json()) == (200, {"instancesDeleted": 1})
    assert api("DELETE", "/instances/").status_code == 400
    window = {"createdTimeFrom": "2000-01-01T00:00:00.000000Z", "runtimeStatus": "Completed"}
    assert api("DELETE", "/instances/", params=window).status_code == 404
    again = api.start("echo_input", json={"n": 2})
    devhost.wait_for_status(again)
    by_filter = api("DELETE", "/instances/", params=window)
    assert (by_filter.status_code, by_filter.json()) == (200, {"instancesDeleted": 1})
    assert devhost.get_status("purge-live") is not None


def test_rewind_and_restart_refusals(devhost: InProcessHost, api: Api) -> None:
    missing = api("POST", "/instances/nobody/rewind")
    assert (missing.status_code, missing.json()) == (404, 'No orchestration with instance ID "$nobody" found.')
    done = api.start("echo_input", json={"n": 1})
    assert devhost.wait_for_status(done)["runtimeStatus"] == "Completed"
    not_failed = api("POST", f"/instances/{done}/rewind")
    assert not_failed.status_code == 412
    restart_missing = api("POST", "/instances/nobody/restart")
    assert restart_missing.status_code == 400
    restarted = api("POST", f"/instances/{done}/restart")
    assert restarted.status_code == 202
    assert restarted.json()["id"] != done
    failed = api.start("failing")
    assert devhost.wait_for_status(failed)["runtimeStatus"] == "Failed"
    assert api("POST", f"/instances/{failed}/rewind", params={"reason": "retry"}).status_code == 202


def test_query_instances_with_paging(devhost: InProcessHost, api: Api) -> None:
    ids = [api.start("echo_input", f"page-{n}", json={"n": n}) for n in range(3)]
    for instance_id in ids:
        devhost.wait_for_status(instance_id)
    first = api("GET", "/instances/", params={"instanceIdPrefix": "page-", "top": "2"})
    assert first.status_code == 200
    token = first.headers["x-ms-continuation-token"]
    assert token
    second = api("GET", "/instances/", params={"instanceIdPrefix": "page-", "top": "2"},
                 headers={"x-ms-continuation-token": token})
    seen = [s["instanceId"] for s in first.json() + second.json()]
    assert sorted(seen) == ids
    assert second.headers["x-ms-continuation-token"] == ""
    completed = api("GET", "/instances", params={"runtimeStatus": "Completed,Bogus", "instanceIdPrefix": "page-"})
    assert len(completed.json()) == 3


def test_entity_routes(devhost: InProcessHost, api: Api) -> None:
    assert api("GET", "/entities/Counter/k1").status_code == 404
    # A JSON string literal holding JSON text is what the SDK's entity get_input() can decode (E.2.4).
    assert api("POST", "/entities/Counter/k1", params={"op": "add"}, json="3").status_code == 202
    assert api("POST", "/entities/counter/", params={"op": "add"}, json="4").status_code == 202
    devhost.wait_until_idle()
    read = api("GET", "/entities/Counter/k1")
    assert (read.status_code, read.json()) == (200, 3)
    assert read.headers["content-type"] == "application/json; charset=utf-8"
    assert api("GET", "/entities/Counter/$").json() == 4
    listed = api("GET", "/entities/counter", params={"fetchState": "true"})
    assert listed.status_code == 200
    assert {(e["entityId"]["key"], e["state"]) for e in listed.json()} == {("k1", 3), ("", 4)}
    unknown = api("POST", "/entities/Nope/k", params={"op": "x"})
    assert unknown.status_code == 400
    assert "Message" in unknown.json()
    bad_json = api("POST", "/entities/Counter/k1", params={"op": "add"}, content=b"{",
                   headers={"content-type": "application/json"})
    assert bad_json.status_code == 400
    assert bad_json.json()["Message"].startswith("Could not parse JSON content")
    assert api("PUT", "/entities/Counter/k1").status_code == 404


def test_unknown_api_paths_are_404(api: Api) -> None:
    assert api("GET", "/whatever").status_code == 404
    assert api("GET", "/").status_code == 404


def test_a_nan_or_endless_wait_is_refused_as_timespan_refuses_it(devhost: InProcessHost, api: Api) -> None:
    """TimeSpan.FromSeconds(NaN) throws ArgumentException (400; the instance was started first), a duration past
    TimeSpan's range OverflowException (500). devhost used to wait on a NaN loop timer and never answer."""
    nan = api("POST", "/orchestrators/wait_event/nan-wait", params={"timeout": "NaN", "pollingInterval": "1"},
              timeout=10)
    assert nan.status_code == 400
    assert nan.json()["Message"] == "One or more of the arguments submitted is incorrect"
    assert devhost.wait_for_status("nan-wait", "Running")["runtimeStatus"] == "Running"
    endless = api("POST", "/orchestrators/wait_event/endless-wait", params={"timeout": "1e300", "pollingInterval": "1"},
                  timeout=10)
    assert endless.status_code == 500
    restarted = api("POST", "/instances/nan-wait/restart", params={"timeout": "1", "pollingInterval": "nan"},
                    timeout=10)
    assert (restarted.status_code, restarted.json()["Message"]) == (
        400, "InstanceId does not match a valid orchestration instance.")


def test_a_body_past_the_hosts_limit_is_413_not_500(devhost: InProcessHost, devhost_client: httpx.Client) -> None:
    """The Functions host takes bodies up to 100 MB and answers 413 beyond, before any handler."""
    base = BASES[0]
    assert devhost_client.post(f"{base}/orchestrators/wait_event/big-body").status_code == 202
    devhost.wait_for_status("big-body", "Running")
    too_big = b'"' + b"a" * (100 * 1024 * 1024) + b'"'
    for path in ("/orchestrators/echo_input", "/instances/big-body/raiseEvent/Approval", "/entities/Counter/k"):
        response = devhost_client.post(base + path, content=too_big, headers={"content-type": "application/json"},
                                       timeout=60)
        assert response.status_code == 413, (path, response.text)
    assert devhost.get_status("big-body")["runtimeStatus"] == "Running"


def test_bodies_are_read_as_read_as_string_async_reads_them(devhost: InProcessHost, api: Api) -> None:
    """A byte that is not UTF-8 reads as U+FFFD and a UTF-8 byte order mark is skipped, as .NET's
    ReadAsStringAsync reads them: devhost answered 500 (a strict decode) and 400 (the BOM before the JSON)."""
    json_type = {"content-type": "application/json"}
    started = api("POST", "/orchestrators/echo_input", content=b"\xef\xbb\xbf" + b'{"n": 1}', headers=json_type)
    assert started.status_code == 202, started.text
    assert devhost.wait_for_status(started.json()["id"])["output"] == {"n": 1}
    api.start("wait_event", "stray-byte")
    devhost.wait_for_status("stray-byte", "Running")
    raised = api("POST", "/instances/stray-byte/raiseEvent/Approval", content=b'"caf\xe9"', headers=json_type)
    assert raised.status_code == 202, raised.text
    assert devhost.wait_for_status("stray-byte")["output"] == {"payload": "caf\ufffd", "type": "str"}


def test_a_time_outside_datetimes_range_counts_as_absent(devhost: InProcessHost, api: Api) -> None:
    """DateTime.TryParse fails for a time whose UTC instant falls before year 1 (it is then not given): devhost's
    conversion raised OverflowError, a 500."""
    early = {"createdTimeFrom": "0001-01-01T00:00:00+05:00"}
    assert api("GET", "/instances", params=early).status_code == 200
    purge = api("DELETE", "/instances", params=early)
    assert (purge.status_code, purge.json()) == (400, "Please provide value for 'createdTimeFrom' parameter.")


def test_a_plus_in_an_instance_id_is_a_plus(devhost: InProcessHost, api: Api) -> None:
    """The Python client puts instance ids into the path as they are; in a path '+' is no space (that rule is the
    query string's): devhost started 'order+1' as 'order 1'."""
    assert api.start("echo_input", "order+1", json={"n": 1}) == "order+1"
    status = devhost.wait_for_status("order+1")
    assert status["instanceId"] == "order+1"
    assert api("GET", "/instances/order+1").json()["instanceId"] == "order+1"
    assert api("GET", "/instances/order 1").status_code == 404


def test_links_encode_the_instance_id_as_webutility_urlencode_does(devhost: InProcessHost, api: Api) -> None:
    """The extension (v2.13.7, GetClientResponseLinks) puts WebUtility.UrlEncode(instanceId) into its links: a space
    becomes '+', which the path never decodes back, so on Azure the link asks for the instance 'spaced+id' and is 404
    (extension issue #2590). devhost quoted it ('%20'), so the link worked here and not there."""
    response = api("POST", "/orchestrators/echo_input/spaced id(1)~", json={"n": 1})
    assert response.status_code == 202, response.text
    devhost.wait_for_status("spaced id(1)~")
    link = response.json()["statusQueryGetUri"]
    assert "/instances/spaced+id(1)%7E?" in link
    assert response.headers["location"] == link
    assert devhost.client.get(link).status_code == 404
    assert api("GET", "/instances/spaced id(1)~").status_code == 200


def test_runtime_status_numbers_are_enum_values(devhost: InProcessHost, api: Api) -> None:
    """The handler reads runtimeStatus with Enum.TryParse, which takes numbers: 1 is Completed, 0 Running, and a
    value no status has (42) matches no instance (devhost skipped numbers: no filter, every instance). Azure
    Storage's query cannot parse Unknown (-1): 400."""
    done = api.start("echo_input", "numbered-done", json={"n": 1})
    devhost.wait_for_status(done)
    running = api.start("wait_event", "numbered-running")
    devhost.wait_for_status(running, "Running")

    def ids(status: str) -> set[str]:
        response = api("GET", "/instances", params={"runtimeStatus": status})
        assert response.status_code == 200, response.text
        return {s["instanceId"] for s in response.json()}

    assert done in ids("1") and running not in ids("1")
    assert running in ids("0") and done not in ids("0")
    assert ids("Completed") == ids("1")
    assert ids("42") == set()
    assert {done, running} <= ids("Bogus")  # (nothing parsed: no filter)
    for unknown in ("-1", "Unknown"):
        refused = api("GET", "/instances", params={"runtimeStatus": unknown})
        assert refused.status_code == 400
        assert refused.json()["Message"] == "One or more of the arguments submitted is incorrect"
    since = {"createdTimeFrom": "2000-01-01T00:00:00Z"}
    assert api("DELETE", "/instances", params={**since, "runtimeStatus": "42"}).status_code == 404
    assert api("GET", f"/instances/{done}").status_code == 200
    purged = api("DELETE", "/instances", params={**since, "runtimeStatus": "1"})
    assert purged.status_code == 200 and purged.json()["instancesDeleted"] >= 1
    assert api("GET", f"/instances/{done}").status_code == 404


def test_path_escapes_are_decoded_as_aspnet_decodes_them(devhost: InProcessHost, api: Api) -> None:
    """Kestrel decodes the path, the host's HttpRequestMessageFeature keeps what still reads as %XX when it rebuilds
    the URI, and the extension's route match decodes it again; %2F is never decoded. devhost decoded once, %2F
    included: 'a%2Fb' became two segments (404) and 'x%2541' the id 'x%41'."""
    assert api.start("echo_input", "a%2Fb", json={"n": 1}) == "a%2Fb"
    devhost.wait_for_status("a%2Fb")
    status = api("GET", "/instances/a%2Fb")
    assert status.status_code == 200 and status.json()["instanceId"] == "a%2Fb"
    assert api.start("echo_input", "x%2541", json={"n": 2}) == "xA"
    devhost.wait_for_status("xA")
    assert api("GET", "/instances/xA").json()["instanceId"] == "xA"
    assert api.start("echo_input", "caf%C3%A9-%C3%28", json={"n": 3}) == "café-%C3("  # (not UTF-8: kept)


def test_an_escaped_newline_reaches_the_webhooks_and_their_instance_id_checks(api: Api) -> None:
    """'%0A' decodes to a newline the webhooks see (devhost's server once answered its own text 404 before them): a
    new instance id with a control character is refused as the extension refuses it, an unknown one is not found."""
    refused = api("POST", "/orchestrators/echo_input/a%0Ab", json={"n": 1})
    assert refused.status_code == 400
    assert refused.json()["Message"] == "One or more of the arguments submitted is incorrect"
    assert api("GET", "/instances/a%0Ab").status_code == 404
    assert api("POST", "/instances/a%0Ab/raiseEvent/x%0Ay", json={}).status_code == 404
    assert api("POST", "/instances/a%0Ab/terminate").status_code == 404


def test_a_polling_interval_past_the_timeout_is_refused_on_azure_storage(devhost: InProcessHost, api: Api) -> None:
    """WaitForCompletionOrCreateCheckStatusResponseAsync throws ArgumentException when the retry interval exceeds
    the timeout (Azure Storage, the default provider, has no poll-free wait): 400 after the start, and the restart
    handler's own 400. devhost waited."""
    started = api("POST", "/orchestrators/echo_input/poll-long", params={"timeout": "1", "pollingInterval": "2"},
                  json={"n": 1}, timeout=10)
    assert started.status_code == 400
    assert started.json()["Message"] == "One or more of the arguments submitted is incorrect"
    assert started.json()["ExceptionMessage"] == "Total timeout 1 should be bigger than retry timeout 2"
    assert devhost.wait_for_status("poll-long")["output"] == {"n": 1}
    restarted = api("POST", "/instances/poll-long/restart", params={"timeout": "0.5", "pollingInterval": "1.5"},
                    timeout=10)
    assert (restarted.status_code, restarted.json()["Message"]) == (
        400, "InstanceId does not match a valid orchestration instance.")
    assert api("POST", "/orchestrators/echo_input", params={"timeout": "5"}, json={"n": 2}).status_code == 202
