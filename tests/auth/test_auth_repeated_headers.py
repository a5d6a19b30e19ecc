"""Headers sent more than once, over real HTTP through devhost: the app's handlers read a repeated header as Azure's
Functions host passes it (each name once, the values comma-joined; `http_api.fastapi_bridge.host_headers`), and a
credential sent twice is refused as such (400 problem+json `credential_repeated`, RFC 6750 section 3.1's status for
`invalid_request`: a malformed request, not one to sign in again), never taken as one of its values. (`Idempotency-Key`
twice: `tests/e2e/test_e2e_idempotency.py`; `Last-Event-ID`: `test_e2e_streams.py`; `traceparent`:
`test_e2e_telemetry.py`.)"""

from __future__ import annotations

import base64
import json

from auth_people import ALICE, BOB, easyauth_headers

from scripted_model import Reply, Script

PROBLEM_JSON = "application/problem+json"


def _refused(response, status: int, code: str, field: str | None) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
    assert (response.json()["code"], response.json().get("field")) == (code, field)


def test_two_authorization_headers_authenticate_as_neither(app_in, model) -> None:
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("jwt") as (app, callers):
        alice, bob = callers.headers(ALICE)["Authorization"], callers.headers(BOB)["Authorization"]
        assert app.http.get("/api/runs", headers={"Authorization": alice}).status_code == 200
        for twice in ([alice, bob], [alice, alice], [alice, "Basic Ym9iOng="]):
            response = app.http.get("/api/runs", headers=[("Authorization", value) for value in twice])
            _refused(response, 400, "credential_repeated", "header.Authorization")
            assert response.headers["WWW-Authenticate"] == 'Bearer error="invalid_request"'
            assert not any(value.split()[-1] in response.text for value in twice)  # nothing of a token echoed
        started = app.http.post("/api/agents/payer/runs", json={"input": "hi"},
                                headers=[("Authorization", alice), ("Authorization", bob)])
        _refused(started, 400, "credential_repeated", "header.Authorization")
        # The OpenAI-compatible routes say the same in OpenAI's error shape.
        created = app.http.post("/api/v1/responses", json={"model": "payer", "input": "hi"},
                                headers=[("Authorization", alice), ("Authorization", bob)])
        assert created.status_code == 400 and created.headers["WWW-Authenticate"] == 'Bearer error="invalid_request"'
        assert created.json()["error"] == {"message": "Send one Authorization: Bearer <token> header.",
                                           "type": "invalid_request_error", "param": "header.Authorization",
                                           "code": "credential_repeated"}
        assert app.store_call(lambda store: store.list_owner_runs(ALICE.id)).items == []
        assert app.store_call(lambda store: store.list_owner_runs(BOB.id)).items == []


def test_one_authorization_of_another_scheme_holding_commas_is_asked_for_a_bearer_token(app_in, model) -> None:
    """A single `Digest` (or other) credential holds commas by its own syntax: it is not two headers, and the caller
    is told which scheme to send (401), not that it sent a credential twice."""
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("jwt") as (app, _):
        for value in ('Digest username="alice", realm="app", nonce="n1"', "Basic Ym9iOng=, Basic YWxpY2U6eA=="):
            response = app.http.get("/api/runs", headers={"Authorization": value})
            _refused(response, 401, "unauthenticated", None)
            assert response.headers["WWW-Authenticate"] == "Bearer"
            assert response.json()["detail"] == "Send Authorization: Bearer <token>."


def test_two_easyauth_principals_are_refused_never_one_picked(app_in, model) -> None:
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("easyauth") as (app, _):
        alice, bob = easyauth_headers(ALICE), easyauth_headers(BOB)
        assert app.http.get("/api/runs", headers=alice).status_code == 200
        no_id_claim = base64.b64encode(json.dumps({"claims": []}).encode()).decode()
        cases = {
            "x-ms-client-principal": [*alice.items(), ("X-MS-CLIENT-PRINCIPAL", bob["X-MS-CLIENT-PRINCIPAL"])],
            # The same principal twice is as wrong: the front end is not the one App Service runs.
            "x-ms-client-principal ": [*alice.items(), ("X-MS-CLIENT-PRINCIPAL", alice["X-MS-CLIENT-PRINCIPAL"])],
            "x-ms-client-principal-id": [("X-MS-CLIENT-PRINCIPAL", no_id_claim), ("X-MS-CLIENT-PRINCIPAL-ID", ALICE.id),
                                         ("X-MS-CLIENT-PRINCIPAL-ID", BOB.id)],
        }
        for header, headers in cases.items():
            for method, path in (("GET", "/api/runs"), ("POST", "/api/agents/payer/runs")):
                response = app.http.request(method, path, headers=headers, json={"input": "hi"})
                _refused(response, 400, "credential_repeated", f"header.{header.strip()}")
                assert response.headers["WWW-Authenticate"] == "EasyAuth"
        for person in (ALICE, BOB):
            assert app.store_call(lambda store, p=person: store.list_owner_runs(p.id)).items == []

