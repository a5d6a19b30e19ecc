"""HTTP triggers served like the Functions host: routes, methods, request fields, responses, failures in user code."""

import httpx
import pytest

from devhost.testing import InProcessHost

pytestmark = pytest.mark.devhost_app("tests/devhost/apps/http_basic")


def test_admin_status_reports_running(devhost_client: httpx.Client) -> None:
    response = devhost_client.get("/admin/host/status")
    assert response.status_code == 200
    status = response.json()
    assert status["state"] == "Running" and status["durable"]["engine"] == "devhost"
    assert status["worker"] == "devhost-inprocess"


def test_str_return_value_is_a_text_200(devhost_client: httpx.Client) -> None:
    response = devhost_client.get("/api/hello", params={"name": "Tokyo"})
    assert response.status_code == 200
    assert response.text == "hello Tokyo"
    assert response.headers["content-type"] == "text/plain; charset=utf-8"


def test_request_fields_reach_the_function(devhost_client: httpx.Client) -> None:
    response = devhost_client.post(
        "/api/echo/a/b%20c?q=1&q=2&x=y", content=b"payload", headers={"X-Custom": "v"}
    )
    assert response.status_code == 200
    seen = response.json()
    assert seen["method"] == "POST"
    assert seen["url"].endswith("/api/echo/a/b%20c?q=1&q=2&x=y")
    assert seen["params"] == {"q": "1,2", "x": "y"}
    assert seen["route_params"] == {"rest": "a/b c"}
    assert seen["headers"] == {"x-custom": "v"}
    assert seen["body"] == "payload"


# What the Functions host puts in `RpcHttp.query` (see `devhost.http.conversion.host_query` for the sources): every
# value of a repeated name comma-joined, empty values skipped, a name without a value left out, names grouped
# ignoring case (spelt as at their second occurrence).
REPEATED_QUERY = (
    "include[]=a&include[]=b&x=1&x=&x=2,3&empty=&flag&Limit=1&limit=2&LIMIT=3&one=%2C+&ss=1&SS=2&%C3%9F=3",
    {"include[]": "a,b", "x": "1,2,3", "limit": "1,2,3", "one": ", ", "SS": "1,2", "ß": "3"},
)


def test_repeated_query_names_reach_the_function_as_the_functions_host_sends_them(
    devhost_client: httpx.Client,
) -> None:
    query, params = REPEATED_QUERY
    seen = devhost_client.get(f"/api/echo/q?{query}").json()
    assert seen["params"] == params
    assert seen["url"].endswith(f"/api/echo/q?{query}")  # the URL keeps every value as sent


# What the Functions host puts in `RpcHttp.headers` (see `devhost.http.conversion.host_headers` for the sources):
# names lower-cased and grouped ignoring case, the values of a repeated one comma-joined without a space and with
# empty ones skipped, an empty header kept as "".
REPEATED_HEADERS = (
    [("X-Twice", "a"), ("x-twice", "b, c"), ("X-Gap", "1"), ("X-Gap", ""), ("X-Gap", "2"), ("X-Empty", ""),
     ("X-Empties", ""), ("X-Empties", ""), ("X-One", "v")],
    {"x-twice": "a,b, c", "x-gap": "1,2", "x-empty": "", "x-empties": "", "x-one": "v"},
)


def test_repeated_headers_reach_the_function_as_the_functions_host_sends_them(devhost_client: httpx.Client) -> None:
    sent, seen = REPEATED_HEADERS
    assert devhost_client.get("/api/echo/h", headers=sent).json()["headers"] == seen


def test_an_escaped_slash_stays_escaped_in_the_route_value(devhost_client: httpx.Client) -> None:
    """Kestrel decodes the path except %2F, so the Functions host routes 'a%2Fb' as one segment and hands the worker
    the route value 'a%2Fb'; devhost gave 'a/b'."""
    response = devhost_client.post("/api/echo/x/a%2Fb%20c", content=b"")
    assert response.status_code == 200
    assert response.json()["route_params"] == {"rest": "x/a%2Fb c"}


def test_an_escaped_newline_is_routed_like_any_other_character(devhost_client: httpx.Client) -> None:
    """The host routes '%0A' in a path to the function, the decoded newline in its route value; devhost's server
    answered its own text 404 before routing (its catch-all pattern's `.` did not match a newline)."""
    response = devhost_client.post("/api/echo/x/a%0Ab%0D%0A", content=b"")
    assert response.status_code == 200
    assert response.json()["route_params"] == {"rest": "x/a\nb\r\n"}
    assert devhost_client.get("/api/items/%0A").json() == {"name": "\n"}


def test_methods_are_enforced(devhost_client: httpx.Client) -> None:
    assert devhost_client.post("/api/hello").status_code == 404
    assert devhost_client.delete("/api/echo/x").status_code == 200


def test_route_constraints_choose_the_function(devhost_client: httpx.Client) -> None:
    assert devhost_client.get("/api/items/42").text == "int:42"
    assert devhost_client.get("/api/items/abc").json() == {"name": "abc"}
    assert devhost_client.get("/api/items/abc/side").json() == {"name": "abc", "part": "side"}
    assert devhost_client.get("/api/async/ab1").status_code == 404
    assert devhost_client.get("/api/nothing-here").status_code == 404
    assert devhost_client.get("/elsewhere").status_code == 404


def test_async_function_sets_status_and_headers(devhost_client: httpx.Client) -> None:
    response = devhost_client.get("/api/async/hey")
    assert (response.status_code, response.text, response.headers["x-shout"]) == (201, "HEY", "yes")


def test_json_and_binary_bodies(devhost_client: httpx.Client) -> None:
    assert devhost_client.post("/api/json", json={"a": [1, 2]}).json() == {"got": {"a": [1, 2]}}
    assert devhost_client.post("/api/json", content=b"{nope").status_code == 400
    binary = devhost_client.post("/api/binary", content=b"\x00\x01\xff")
    assert binary.content == b"\xff\x01\x00"
    assert binary.headers["content-type"] == "application/octet-stream"


def test_named_http_output_binding_wins(devhost_client: httpx.Client) -> None:
    response = devhost_client.get("/api/out")
    assert (response.status_code, response.text) == (202, "from out binding")


def test_a_none_return_beside_a_named_output_fails_as_on_the_worker(devhost_client: httpx.Client) -> None:
    """With `app.route`'s `$return` binding, the worker encodes the returned None too and fails the call."""
    assert devhost_client.get("/api/out-and-return").status_code == 500


def test_context_parameter_is_passed(devhost_client: httpx.Client) -> None:
    seen = devhost_client.get("/api/context").json()
    assert seen["function"] == "with_context"
    assert len(seen["invocation"]) == 36


def test_cookies_become_set_cookie_headers(devhost_client: httpx.Client) -> None:
    assert devhost_client.get("/api/cookie").headers["set-cookie"] == "a=1; Path=/"


@pytest.mark.parametrize("path", ["/api/boom", "/api/aboom", "/api/exit", "/api/dict", "/api/none"])
def test_user_code_failures_are_500_and_the_host_keeps_serving(devhost_client: httpx.Client, path: str) -> None:
    response = devhost_client.get(path)
    assert response.status_code == 500
    assert response.content == b""
    assert devhost_client.get("/api/hello").status_code == 200


def test_local_settings_are_applied_and_restored(devhost_factory, apps_dir) -> None:
    import os

    assert "HTTP_BASIC_GREETING" not in os.environ
    host: InProcessHost = devhost_factory(apps_dir / "http_basic", env={"HTTP_BASIC_OVERRIDE": "from-env"})
    assert host.client.get("/api/setting", params={"name": "HTTP_BASIC_GREETING"}).text == "from-local-settings"
    assert host.client.get("/api/setting", params={"name": "HTTP_BASIC_OVERRIDE"}).text == "from-env"
    host.stop()
    assert "HTTP_BASIC_GREETING" not in os.environ
    assert "HTTP_BASIC_OVERRIDE" not in os.environ


def test_environment_wins_over_local_settings(devhost_factory, apps_dir) -> None:
    host: InProcessHost = devhost_factory(apps_dir / "http_basic", env={"HTTP_BASIC_GREETING": "from-env"})
    assert host.client.get("/api/setting", params={"name": "HTTP_BASIC_GREETING"}).text == "from-env"


@pytest.mark.parametrize(("app", "path"), [("http_prefix", "/v1/ping"), ("http_noprefix", "/ping")])
def test_host_json_route_prefix(devhost_factory, apps_dir, app: str, path: str) -> None:
    host: InProcessHost = devhost_factory(apps_dir / app)
    assert host.client.get(path).text == "pong"
    assert host.client.get("/api/ping").status_code == 404
    assert host.client.get("/admin/host/status").status_code == 200


def test_sync_functions_run_concurrently(devhost_client: httpx.Client) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        left = pool.submit(devhost_client.get, "/api/rendezvous/left")
        right = pool.submit(devhost_client.get, "/api/rendezvous/right")
        assert {left.result(timeout=20).text, right.result(timeout=20).text} == {"left", "right"}
