"""Schema-driven fuzz of every HTTP route, from the OpenAPI document the app serves at `/api/openapi.json`.

schemathesis turns the document into hypothesis strategies: valid requests (positive), invalid ones (negative), and
valid ones aimed at real runs, sessions and approvals (so bodies and queries reach past the 404s). Every response
must be free of 5xx, stack traces and secrets; positive cases must also match the documented status codes, content
types and response schemas. `derandomize=True` keeps CI runs reproducible. Everything runs twice: with
`AUTH_MODE=none` and with `AUTH_MODE=easyauth` (every request carries the principal Easy Auth would pass).

Hostile bodies too: a valid body with one value replaced by JSON nested hundreds or thousands deep, a number of
thousands of digits, `1e999` or `NaN` (sent as raw text: Python cannot even print such an integer), and
`/v1/responses` output schemas with `$ref`s to a live server on loopback (which must never be contacted), to a
`file:` URL, looping, too deep or too large. Still no 5xx.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from listeners import RecordingServer  # noqa: E402
from load_helpers import PROGRESS_TIMEOUT_S  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from bench.workload.brain import email_prompt  # noqa: E402
from bench.workload.client import async_client, poll, start_run  # noqa: E402
from bench.workload.host import TOKEN_SECRET, workload_host  # noqa: E402
from devhost.testing import InProcessHost  # noqa: E402
from http_api.routes import ROUTES, document  # noqa: E402
from scripted_model.server import ScriptedModelServer  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

EXAMPLES = 30
LEAKS = ("Traceback (most recent call last)", 'File "/', TOKEN_SECRET, "durable-agents-development-secret")
SCHEMA = schemathesis.openapi.from_dict(document())
OPERATION_LABELS = [result.ok().label for result in SCHEMA.get_all_operations()]
# Routes with something to get wrong (path parameters, a query, a body): the others have no invalid request.
WITH_INPUTS = [f"{r.method.upper()} {r.api_path}" for r in ROUTES if r.params or r.query or r.body]
WITH_BODY = [f"{r.method.upper()} {r.api_path}" for r in ROUTES if r.body]


_PRINCIPAL = {"auth_typ": "aad", "claims": [{"typ": "oid", "val": "oid-fuzz"}, {"typ": "name", "val": "Fuzz"}]}
# The headers every request sends, per AUTH_MODE (Easy Auth's, made by the test: the platform is not here).
MODE_HEADERS: dict[str, dict[str, str]] = {
    "none": {},
    "easyauth": {"X-MS-CLIENT-PRINCIPAL": base64.b64encode(json.dumps(_PRINCIPAL).encode()).decode()},
}


@pytest.fixture(scope="module", params=list(MODE_HEADERS))
def auth_mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def api_host(
    model_server: ScriptedModelServer, tmp_path_factory: pytest.TempPathFactory, auth_mode: str
) -> Iterator[InProcessHost]:
    store = str(tmp_path_factory.mktemp("fuzz") / "sessions.sqlite3")
    # Streams on a run waiting for approval would stay open: end them after a second (the documented time limit).
    env = {"AUTH_MODE": auth_mode, "STREAM_MAX_SECONDS": "1"}
    with workload_host(model_server.base_url, store_path=store, env=env) as host:
        host.fuzz_headers = MODE_HEADERS[auth_mode]  # type: ignore[attr-defined]
        yield host


@pytest.fixture(scope="module")
def real_ids(api_host: InProcessHost) -> dict[str, str]:
    """Ids of a real session, a run waiting for approval and its pending approval."""

    async def make() -> dict[str, str]:
        async with async_client(api_host.base_url) as client:
            client.headers.update(api_host.fuzz_headers)  # type: ignore[attr-defined]
            view = await start_run(client, email_prompt("fuzz@example.com"))
            view, _ = await poll(client, view, until=frozenset({"requires_action"}), deadline_s=PROGRESS_TIMEOUT_S)
        return {
            "agent": "worker",
            "run_id": view["run_id"],
            "session_id": view["session_id"],
            "approval_id": view["pending_approvals"][0]["approval_id"],
        }

    return asyncio.run(make())


EXAMPLES_SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)


def _session(api_host: InProcessHost) -> requests.Session:
    session = requests.Session()
    session.trust_env = False
    session.headers.update(api_host.fuzz_headers)  # type: ignore[attr-defined]
    return session


def _assert_no_leak(response: requests.Response) -> None:
    assert response.status_code < 500, f"{response.status_code}: {response.text[:800]}"
    for leak in LEAKS:
        assert leak not in response.text, f"response leaks {leak!r}: {response.text[:800]}"
        assert all(leak not in value for value in response.headers.values())


def _fuzz(api_host: InProcessHost, label: str, mode: GenerationMode, path_parameters: dict[str, Any] | None) -> None:
    operation = SCHEMA.find_operation_by_label(label)
    assert operation is not None
    strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)
    session = _session(api_host)

    @EXAMPLES_SETTINGS
    @given(st.data())
    def check(data: st.DataObject) -> None:
        case = data.draw(strategy)
        response = case.call(base_url=api_host.base_url, session=session, timeout=90)
        _assert_no_leak(response)
        if mode is GenerationMode.POSITIVE:
            case.validate_response(
                response, checks=[status_code_conformance, content_type_conformance, response_schema_conformance]
            )

    try:
        check()
    finally:
        session.close()


@pytest.mark.parametrize("label", OPERATION_LABELS)
def test_fuzz_route_with_valid_requests(api_host: InProcessHost, label: str) -> None:
    _fuzz(api_host, label, GenerationMode.POSITIVE, None)


@pytest.mark.parametrize("label", WITH_INPUTS)
def test_fuzz_route_with_invalid_requests(api_host: InProcessHost, label: str) -> None:
    _fuzz(api_host, label, GenerationMode.NEGATIVE, None)


@pytest.mark.parametrize("label", [op for op in OPERATION_LABELS if "{" in op])
def test_fuzz_route_on_real_ids(api_host: InProcessHost, real_ids: dict[str, str], label: str) -> None:
    operation = SCHEMA.find_operation_by_label(label)
    assert operation is not None
    names = {p.name for p in operation.path_parameters}
    _fuzz(api_host, label, GenerationMode.POSITIVE, {k: v for k, v in real_ids.items() if k in names})


def test_the_host_runs_in_its_auth_mode(api_host: InProcessHost, auth_mode: str) -> None:
    """The fuzz really runs as the mode says: without the principal, easyauth refuses."""
    assert api_host.client.get("/api/health").json()["auth"]["mode"] == auth_mode
    bare = api_host.client.get("/api/agents")
    assert bare.status_code == (401 if auth_mode == "easyauth" else 200)


def test_the_app_serves_the_document(api_host: InProcessHost) -> None:
    response = api_host.client.get("/api/openapi.json")
    assert response.status_code == 200 and response.json() == document()
    assert response.json()["openapi"] == "3.1.0"


# Raw JSON text put where a value goes: deep nesting, huge or non-finite numbers, non-JSON constants.
HOSTILE_VALUES = st.one_of(
    st.sampled_from([65, 200, 1000, 5000, 60_000]).map(lambda n: "[" * n + "1" + "]" * n),
    st.sampled_from([65, 200, 1000]).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.sampled_from([21, 400, 4301, 5000, 100_000]).map(lambda n: "9" * n),
    st.sampled_from(["1e999", "-1e999", "NaN", "Infinity", "-Infinity", "1." + "0" * 5000 + "1"]),
)
PLACEHOLDER = "__hostile__"


def _hostile_schemas(remote: str) -> st.SearchStrategy[dict[str, Any]]:
    def obj(inner: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": {"x": inner}}

    deep: dict[str, Any] = {"type": "object"}
    for _ in range(20):  # past the schema depth limit, within the body's
        deep = obj(deep)
    return st.sampled_from(
        [
            obj({"$ref": remote}),
            obj({"$ref": "file:///etc/passwd"}),
            obj({"$dynamicRef": remote}),
            {"$id": remote, **obj({"$ref": "other.json"})},
            {"$schema": remote, "type": "object"},
            {"type": "object", "$ref": "#"},
            obj({"$ref": "#/$defs/missing"}),
            deep,
            {"type": "object", "description": "x" * 100_000},
        ]
    )


def _send_raw(session: requests.Session, kwargs: dict[str, Any], body: Any, hostile: str) -> requests.Response:
    text = json.dumps(body).replace(json.dumps(PLACEHOLDER), hostile)
    headers = {**(kwargs.get("headers") or {}), "Content-Type": "application/json"}
    return session.request(
        kwargs["method"], kwargs["url"], params=kwargs.get("params"), data=text.encode(), headers=headers, timeout=90
    )


@pytest.mark.parametrize("label", WITH_BODY)
def test_fuzz_route_with_hostile_bodies(api_host: InProcessHost, real_ids: dict[str, str], label: str) -> None:
    operation = SCHEMA.find_operation_by_label(label)
    assert operation is not None
    names = {p.name for p in operation.path_parameters}
    strategy = operation.as_strategy(
        generation_mode=GenerationMode.POSITIVE, path_parameters={k: v for k, v in real_ids.items() if k in names}
    )
    session = _session(api_host)

    @EXAMPLES_SETTINGS
    @given(st.data())
    def check(data: st.DataObject) -> None:
        case = data.draw(strategy)
        body = dict(case.body) if isinstance(case.body, dict) else {}
        keys = [*sorted(body), "hostile_extra"]
        body[data.draw(st.sampled_from(keys))] = PLACEHOLDER
        response = _send_raw(session, case.as_transport_kwargs(base_url=api_host.base_url), body,
                             data.draw(HOSTILE_VALUES))
        _assert_no_leak(response)
        assert response.status_code in (400, 404, 409, 410, 413, 422), f"{response.status_code}: {response.text[:300]}"

    try:
        check()
    finally:
        session.close()


def test_fuzz_responses_with_hostile_output_schemas(api_host: InProcessHost) -> None:
    """`text.format` schemas that would make the app fetch, loop or work without bound: refused at the edge (400
    naming `text.format.schema`) or, where the edge cannot tell (a looping or missing local ref), a failed response;
    never a 5xx, never a contact."""
    session = _session(api_host)
    with RecordingServer() as remote:

        @EXAMPLES_SETTINGS
        @given(schema=_hostile_schemas(remote.url()), background=st.booleans())
        def check(schema: dict[str, Any], background: bool) -> None:
            body = {
                "model": "worker",
                "input": "hello",
                "background": background,
                "text": {"format": {"type": "json_schema", "name": "out", "schema": schema}},
            }
            response = session.post(f"{api_host.base_url}/api/v1/responses", json=body, timeout=90)
            _assert_no_leak(response)
            if response.status_code == 400:
                assert response.json()["error"]["param"] == "text.format.schema", response.text[:300]
            else:
                assert response.status_code == 200 and response.json()["status"] != "completed", response.text[:300]

        try:
            check()
        finally:
            session.close()
        assert remote.requests == []
