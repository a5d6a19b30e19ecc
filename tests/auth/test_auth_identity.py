"""Who is calling, per AUTH_MODE: the principal comes only from the mode's source; everything else is 401."""

from __future__ import annotations

import base64
import re

from auth_people import ALICE, BOB, easyauth_headers

from http_api.routes import ROUTES
from scripted_model import Reply, Script

PROBLEM_JSON = "application/problem+json"


def _whoami(app, headers: dict[str, str]) -> tuple[int, str | None]:
    """Start a run as these headers and read who owns it (the session list only shows the caller's sessions)."""
    response = app.http.post("/api/agents/payer/runs", json={"input": "hello"}, headers=headers)
    if response.status_code >= 400:
        return response.status_code, None
    run = app.store_call(lambda store: store.get_run(response.json()["run_id"]))
    return response.status_code, run.owner_id


def test_easyauth_takes_the_principal_from_the_platform_headers(app_in, model) -> None:
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("easyauth") as (app, _):
        assert app.http.get("/api/health").json()["auth"] == {"mode": "easyauth", "warning": None,
                                                              "local_principal_picker": True}
        assert _whoami(app, easyauth_headers(ALICE)) == (202, ALICE.id)
        run = app.store_call(lambda store: store.list_owner_runs(ALICE.id))
        assert run.items[0].owner_name == "Alice"
        # No principal, a broken one, or one without any id: 401 unauthenticated, on every non-public route.
        for headers in ({}, {"X-MS-CLIENT-PRINCIPAL": "not base64 json!"},
                        {"X-MS-CLIENT-PRINCIPAL": base64.b64encode(b'{"claims": []}').decode()},
                        # nested past Python's recursion limit (a RecursionError was a 500)
                        {"X-MS-CLIENT-PRINCIPAL": base64.b64encode(b"[" * 5000 + b"]" * 5000).decode()},
                        {"X-MS-CLIENT-PRINCIPAL-NAME": "alice"}):
            for method, path in (("GET", "/api/agents"), ("GET", "/api/runs"), ("GET", "/api/sessions"),
                                 ("GET", "/api/approvals"), ("POST", "/api/agents/payer/runs")):
                response = app.http.request(method, path, headers=headers, json={"input": "x"})
                assert response.status_code == 401, (headers, path, response.text)
                assert response.headers["content-type"] == PROBLEM_JSON
                assert response.json()["code"] == "unauthenticated"
        # Only the object id claim counts; the -ID header is the fallback when the claims carry none.
        only_header = {"X-MS-CLIENT-PRINCIPAL": base64.b64encode(b'{"claims": []}').decode(),
                       "X-MS-CLIENT-PRINCIPAL-ID": "oid-from-header"}
        assert _whoami(app, only_header) == (202, "oid-from-header")
        app.http.get("/api/health").raise_for_status()  # public: no principal needed


def _error_code(response) -> str | None:
    """The stable code of an error answer: problem+json's `code`, or `error.code` on the OpenAI-compatible routes."""
    if response.headers["content-type"].startswith(PROBLEM_JSON):
        return response.json()["code"]
    if response.headers["content-type"].startswith("application/json"):
        body = response.json()
        return body["error"].get("code") if isinstance(body, dict) and isinstance(body.get("error"), dict) else None
    return None


def test_easyauth_refuses_every_route_that_needs_a_caller_and_serves_the_public_ones(app_in, model) -> None:
    """What lets the deployment leave unauthenticated requests to the app (`infra/modules/appauth.bicep` allows them,
    so that the page, signed decision links and Slack's clicks arrive): without a principal, every route of the table
    that is not public answers 401 `unauthenticated`; no public one does."""
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("easyauth") as (app, _):
        routes = [route for route in ROUTES if "*" not in route.path]  # (the catch-all answers unknown paths)
        assert sum(route.public for route in routes) >= 6 and sum(not route.public for route in routes) >= 30
        for route in routes:
            path = re.sub(r"{[^}]*}", "x", route.api_path)
            response = app.http.request(route.method.upper(), path, json={"input": "x"})
            refused = response.status_code == 401 and _error_code(response) == "unauthenticated"
            assert refused != route.public, (route.name, response.status_code, response.text[:200])


def test_jwt_validates_bearer_tokens_from_the_issuer(app_in, issuer, model) -> None:
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("jwt") as (app, callers):
        assert app.http.get("/api/health").json()["auth"]["mode"] == "jwt"
        assert _whoami(app, callers.headers(ALICE)) == (202, ALICE.id)
        bad_tokens = {
            "expired": issuer.token(ALICE.id, expires_in=-3600),
            "foreign audience": issuer.token(ALICE.id, audience="api://someone-else"),
            "foreign issuer": issuer.token(ALICE.id, issuer="https://login.example.com/other"),
            "unknown key": issuer.token(ALICE.id, foreign=True),
            "garbage": "not.a.token",
            # a header nested past Python's recursion limit (PyJWT's RecursionError was a 500)
            "deep header": base64.urlsafe_b64encode(b"[" * 5000 + b"]" * 5000).decode().rstrip("=") + ".e30.c2ln",
        }
        for label, token in bad_tokens.items():
            response = app.http.get("/api/runs", headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 401, (label, response.text)
            assert response.headers["WWW-Authenticate"].startswith("Bearer"), label
            assert response.json()["code"] == "unauthenticated"
            assert token not in response.text
        missing = app.http.get("/api/runs")
        assert missing.status_code == 401 and missing.headers["WWW-Authenticate"] == "Bearer"
        # Forged Easy Auth headers change nothing: without a token 401, with Bob's token the caller is Bob.
        assert app.http.get("/api/runs", headers=easyauth_headers(ALICE)).status_code == 401
        assert _whoami(app, {**easyauth_headers(ALICE), **callers.headers(BOB)}) == (202, BOB.id)


def test_none_mode_is_one_anonymous_principal_whatever_the_headers(app_in, model) -> None:
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("none") as (app, _):
        assert app.http.get("/api/health").json()["auth"] == {"mode": "none", "warning": None,
                                                              "local_principal_picker": False}
        assert _whoami(app, {}) == (202, "anonymous")
        assert _whoami(app, easyauth_headers(ALICE)) == (202, "anonymous")
        assert _whoami(app, {"Authorization": "Bearer whatever"}) == (202, "anonymous")


def test_health_warns_about_none_mode_on_azure(app_in, model) -> None:
    # On Azure (WEBSITE_INSTANCE_ID) the production guards need SQLite and no authentication chosen on purpose.
    with app_in("none", WEBSITE_INSTANCE_ID="test-instance", SESSION_STORE="sqlite",
                ALLOW_ANONYMOUS_ON_AZURE="true") as (app, _):
        auth = app.http.get("/api/health").json()["auth"]
        assert auth["mode"] == "none" and "AUTH_MODE=none on Azure" in auth["warning"]
