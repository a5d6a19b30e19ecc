"""`AUTH_MODE=jwt` against tokens an attacker would send: real JWTs signed by the local issuer's RSA key with another
algorithm, by keys of other types, with hostile headers. The algorithm is pinned to the issuer's key (RS256); every
token problem is a 401 with one fixed message (no `kid`, no library text), never a 500.

Then valid tokens that may not call: on Entra ID any client application of the tenant gets a token for the API's
audience (client credentials, `.default`: no `scp`, no `roles`). A delegated token needs one of
`AUTH_REQUIRED_SCOPES`, an app-only one one of `AUTH_REQUIRED_APP_ROLES`; `AUTH_ALLOWED_CLIENT_IDS` and
`AUTH_TENANT_ID` narrow further. Refusals are 403 with RFC 6750's `insufficient_scope` challenge."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
import uuid

import jwt
from auth_people import ALICE
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from local_issuer import APP_ROLE, CLIENT, SCOPE, TENANT, LocalIssuer

from scripted_model import Reply, Script

FIXED_DETAIL = "The bearer token is not valid."
HOSTILE_KID = "<kid-that-must-not-come-back>"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _hand_made(header: dict, claims: dict, sign=lambda _: b"") -> str:
    """A token PyJWT would refuse to make (`none`, HS256 keyed with the public key): built by hand."""
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    return f"{signing_input}.{_b64(sign(signing_input.encode()))}"


def _attacks(issuer) -> dict[str, str]:
    claims = jwt.decode(issuer.token(ALICE.id), options={"verify_signature": False})
    public_pem = issuer.key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    tokens = {
        # A valid signature by the issuer's own RSA key, but with an algorithm the key is not for.
        "PS256 with the RS256 key": issuer.token(ALICE.id, algorithm="PS256"),
        "RS512 with the RS256 key": issuer.token(ALICE.id, algorithm="RS512"),
        # The issuer's kid on tokens signed by EC keys: the header's algorithm does not fit the RSA key (was a 500).
        **{f"{alg} against the RSA key": issuer.token(ALICE.id, algorithm=alg,
                                                      signing_key=ec.generate_private_key(curve))
           for alg, curve in (("ES256", ec.SECP256R1()), ("ES384", ec.SECP384R1()), ("ES512", ec.SECP521R1()))},
        "HS256 keyed with the public key": _hand_made(
            {"alg": "HS256", "typ": "JWT", "kid": issuer.kid}, claims,
            lambda data: hmac.new(public_pem, data, hashlib.sha256).digest(),
        ),
        "alg none": _hand_made({"alg": "none", "typ": "JWT", "kid": issuer.kid}, claims),
        "unknown kid": issuer.token(ALICE.id, header={"kid": HOSTILE_KID}),
        "kid not a string": _hand_made({"alg": "RS256", "typ": "JWT", "kid": {"nested": [1, 2]}}, claims),
        "no kid": _hand_made({"alg": "RS256", "typ": "JWT"}, claims),
        "header not JSON": f"{_b64(b'{not json')}.{_b64(json.dumps(claims).encode())}.c2ln",
        "header a list": f"{_b64(b'[1]')}.{_b64(json.dumps(claims).encode())}.c2ln",
        "not base64": "###.###.###",
        "no subject": jwt.encode({k: v for k, v in claims.items() if k not in ("oid", "sub")}, issuer.key,
                                 algorithm="RS256", headers={"kid": issuer.kid}),
    }
    return tokens


def test_tokens_with_another_algorithm_or_a_hostile_header_are_401_with_one_message(app_in, issuer, model) -> None:
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("jwt") as (app, callers):
        assert app.http.get("/api/runs", headers=callers.headers(ALICE)).status_code == 200  # RS256: accepted
        for label, token in _attacks(issuer).items():
            for method, path in (("GET", "/api/runs"), ("POST", "/api/agents/payer/runs")):
                response = app.http.request(method, path, json={"input": "x"},
                                            headers={"Authorization": f"Bearer {token}"})
                assert response.status_code == 401, (label, path, response.text)
                problem = response.json()
                assert (problem["code"], problem["detail"]) == ("unauthenticated", FIXED_DETAIL), (label, problem)
                assert response.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"', label
                assert HOSTILE_KID not in response.text and "nested" not in response.text, label
        assert app.store_call(lambda store: store.list_owner_runs(ALICE.id)).items == []


def test_an_issuer_that_cannot_be_reached_is_a_503_not_the_callers_fault(issuer) -> None:
    import socket

    import pytest

    from http_api.identity import AuthSettings, JwtValidator
    from http_api.problems import ApiProblem

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    settings = AuthSettings(mode="jwt", issuer=issuer.issuer, audience="api://durable-agents-tests",
                            openid_config_url=f"http://127.0.0.1:{closed}/.well-known/openid-configuration",
                            required_scopes="access_as_user")
    with pytest.raises(ApiProblem) as refused:
        JwtValidator(settings).principal({"authorization": f"Bearer {issuer.token(ALICE.id)}"})
    assert (refused.value.status, refused.value.code) == (503, "auth_unavailable")
    assert str(closed) not in refused.value.detail


def test_a_key_the_issuer_withdrew_signs_nothing_once_its_key_set_is_read_again(app_in, model) -> None:
    """The issuer rotates its key out (e.g. after a leak): once the cached key set expires
    (`AUTH_JWKS_CACHE_SECONDS`), tokens signed with the old key are 401; the new key's are accepted. Unknown `kid`s
    fetch the key set at most once per cooldown, not once per token. An issuer of this test's own: the shared one's
    key must not change under other tests."""
    model.set_script(Script(default=Reply(text="Hi.")))
    own = LocalIssuer().start()
    try:
        with app_in("jwt", **own.settings(), AUTH_JWKS_CACHE_SECONDS="1") as (app, _):

            def status(token: str) -> int:
                return app.http.get("/api/runs", headers={"Authorization": f"Bearer {token}"}).status_code

            assert status(own.token(ALICE.id)) == 200
            old_key, old_kid = own.rotate()
            leaked = own.token(ALICE.id, signing_key=old_key, header={"kid": old_kid})
            time.sleep(1.5)  # past the key set's lifetime
            assert status(leaked) == 401
            assert status(own.token(ALICE.id)) == 200

            fetched = own.jwks_requests
            for _ in range(10):
                assert status(own.token(ALICE.id, header={"kid": uuid.uuid4().hex})) == 401
            assert own.jwks_requests - fetched <= 2  # a refresh per cooldown (and per expiry), not per token
    finally:
        own.stop()


DAEMON = "oid-daemon"  # a service principal: its app-only tokens have `sub` = `oid`
CHALLENGE = f'Bearer error="insufficient_scope", scope="{SCOPE}"'


def _status(app, token: str) -> int:
    return app.http.get("/api/runs", headers={"Authorization": f"Bearer {token}"}).status_code


def _refused(app, token: str, code: str, challenge: str = CHALLENGE, label: str = "") -> None:
    """Refused on every route, reading and starting alike: 403 `code`, the challenge, nothing of the token back."""
    for method, path in (("GET", "/api/runs"), ("POST", "/api/agents/payer/runs")):
        response = app.http.request(method, path, json={"input": "x"}, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 403, (label, path, response.text)
        assert response.headers["content-type"].startswith("application/problem+json"), label
        assert response.json()["code"] == code, (label, response.text)
        assert response.headers["WWW-Authenticate"] == challenge, label
        assert token.split(".")[1] not in response.text and HOSTILE not in response.text, label


def test_a_delegated_token_needs_one_of_the_required_scopes(app_in, issuer, model) -> None:
    """A user's token passes with the API's scope among its `scp`; one another client got for other scopes (or none
    of this API's) is 403, and a user's app role does not stand in for the scope."""
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("jwt", AUTH_REQUIRED_SCOPES=f"{SCOPE}, Agents.ReadWrite") as (app, _):
        assert _status(app, issuer.token(ALICE.id)) == 200
        assert _status(app, issuer.token(ALICE.id, claims={"scp": "User.Read Agents.ReadWrite"})) == 200
        challenge = f'Bearer error="insufficient_scope", scope="{SCOPE} Agents.ReadWrite"'
        for scp in ("User.Read", "", "access_as_user2 Access_As_User", "Agents.ReadWrite,User.Read"):
            _refused(app, issuer.token(ALICE.id, claims={"scp": scp}), "insufficient_scope", challenge)
        user_with_the_role = issuer.token(ALICE.id, roles=[APP_ROLE], claims={"scp": "User.Read"})
        _refused(app, user_with_the_role, "insufficient_scope", challenge)
        started = app.http.post("/api/agents/payer/runs", json={"input": "hi"}, headers=issuer.headers(ALICE.id))
        assert started.status_code == 202, started.text
        assert [run.run_id for run in app.store_call(lambda store: store.list_owner_runs(ALICE.id)).items] == [
            started.json()["run_id"]
        ]  # the refused starts made nothing


def test_an_app_only_token_needs_one_of_the_required_app_roles(app_in, issuer, model) -> None:
    """The finding: any daemon of the tenant got a token for the API (client credentials) and called it. Now an
    app-only token needs an app role granted to it; without one (or with another) it is 403, however it is marked
    app-only (Entra's `idtyp`, or no `scp` with `oid` = `sub`), and a `scp` does not make an `idtyp=app` token a
    user's."""
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("jwt") as (app, _):
        granted = issuer.app_token(DAEMON, roles=["Other.Role", APP_ROLE])
        started = app.http.post("/api/agents/payer/runs", json={"input": "hi"},
                                headers={"Authorization": f"Bearer {granted}"})
        assert started.status_code == 202, started.text
        assert len(app.store_call(lambda store: store.list_owner_runs(DAEMON)).items) == 1
        for label, token in {
            "client credentials, .default": issuer.app_token(DAEMON),
            "another role": issuer.app_token(DAEMON, roles=["Other.Role"]),
            "no idtyp": issuer.app_token(DAEMON, idtyp=None),
            "idtyp app with a scp": issuer.app_token(DAEMON, scp=SCOPE),
            "no scp, oid != sub": issuer.token(ALICE.id, claims={"scp": None}),
        }.items():
            _refused(app, token, "insufficient_scope", label=label)
        assert len(app.store_call(lambda store: store.list_owner_runs(DAEMON)).items) == 1


def test_only_the_allowed_client_applications_and_tenant(app_in, issuer, model) -> None:
    """`AUTH_ALLOWED_CLIENT_IDS` names the client applications (`azp` in v2 tokens, `appid` in v1; GUIDs compared
    without case), `AUTH_TENANT_ID` the tenant (`tid`)."""
    model.set_script(Script(default=Reply(text="Hi.")))
    other = "11111111-2222-3333-4444-555555555555"
    with app_in("jwt", AUTH_ALLOWED_CLIENT_IDS=f"{other} {CLIENT.upper()}", AUTH_TENANT_ID=TENANT.upper()) as (app, _):
        assert _status(app, issuer.token(ALICE.id)) == 200
        assert _status(app, issuer.token(ALICE.id, claims={"azp": None, "appid": CLIENT, "ver": "1.0"})) == 200
        assert _status(app, issuer.app_token(DAEMON, roles=[APP_ROLE], azp=other)) == 200
        for claims in ({"azp": "99999999-2222-3333-4444-555555555555"}, {"azp": None},
                       {"azp": None, "appid": "99999999-2222-3333-4444-555555555555"},
                       {"azp": "99999999-2222-3333-4444-555555555555", "appid": CLIENT}):
            _refused(app, issuer.token(ALICE.id, claims=claims), "client_not_allowed")
        for tid in ("99999999-86f1-41af-91ab-2d7cd011db47", None):
            _refused(app, issuer.token(ALICE.id, claims={"tid": tid}), "tenant_not_allowed")


HOSTILE = "<hostile-claim-value>"


def test_claims_of_the_wrong_type_or_size_are_403_never_500(app_in, issuer, model) -> None:
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("jwt", AUTH_ALLOWED_CLIENT_IDS=CLIENT, AUTH_TENANT_ID=TENANT) as (app, _):
        scopes = {
            "a list": [SCOPE], "an object": {SCOPE: HOSTILE}, "a number": 1, "true": True,
            "huge": f"{SCOPE} {HOSTILE} " + "x" * 5000,
        }
        for label, scp in scopes.items():
            _refused(app, issuer.token(ALICE.id, claims={"scp": scp}), "insufficient_scope", label=f"scp {label}")
        roles = {
            "a string": APP_ROLE, "objects": [{"value": APP_ROLE}], "a number among them": [APP_ROLE, 7],
            "nested": [[APP_ROLE]], "too many": [APP_ROLE, *(f"r{i}" for i in range(300))],
            "one huge": [APP_ROLE, HOSTILE + "r" * 300], "an empty one": [APP_ROLE, ""], "an object": {APP_ROLE: 1},
        }
        for label, value in roles.items():  # an app's token and a user's alike: the roles decide approvals
            for token in (issuer.app_token(DAEMON, roles=value), issuer.token(ALICE.id, claims={"roles": value})):
                _refused(app, token, "insufficient_scope", label=f"roles {label}")
        _refused(app, issuer.token(ALICE.id, claims={"azp": {"id": CLIENT}}), "client_not_allowed")
        _refused(app, issuer.token(ALICE.id, claims={"azp": [CLIENT]}), "client_not_allowed")
        _refused(app, issuer.token(ALICE.id, claims={"tid": [TENANT]}), "tenant_not_allowed")
        null_scp = jwt.decode(issuer.token(ALICE.id), options={"verify_signature": False}) | {"scp": None}
        _refused(app, jwt.encode(null_scp, issuer.key, algorithm="RS256", headers={"kid": issuer.kid}),
                 "insufficient_scope", label="scp null")
        assert _status(app, issuer.token(ALICE.id, roles=[APP_ROLE, "Payments.Approver"])) == 200


def test_a_refusal_is_logged_at_info_with_the_reason_and_nothing_of_the_token(app_in, issuer, model, caplog) -> None:
    model.set_script(Script(default=Reply(text="Hi.")))
    with app_in("jwt") as (app, _), caplog.at_level(logging.INFO, logger="http_api.identity"):
        token = issuer.app_token(DAEMON, roles=["Other.Role"], name=HOSTILE)
        _refused(app, token, "insufficient_scope")
    refusals = [r for r in caplog.records if r.name == "http_api.identity" and "not allowed" in r.getMessage()]
    assert refusals and {r.levelno for r in refusals} == {logging.INFO}
    assert "AUTH_REQUIRED_APP_ROLES" in refusals[0].getMessage() and DAEMON in refusals[0].getMessage()
    for record in caplog.records:
        assert token.split(".")[1] not in record.getMessage() and HOSTILE not in record.getMessage()


def test_accepting_any_client_is_an_opt_out_that_says_so(app_in, issuer, model) -> None:
    """With no scope and no app role required the app refuses to start (`test_auth_startup.py`) unless
    `AUTH_ACCEPT_ANY_CLIENT=true`: then any client's token is accepted, and `/api/health` warns. Claims of the wrong
    type are still refused: the roles decide approvals."""
    model.set_script(Script(default=Reply(text="Hi.")))
    nothing_required = {"AUTH_REQUIRED_SCOPES": "", "AUTH_REQUIRED_APP_ROLES": "", "AUTH_ACCEPT_ANY_CLIENT": "true"}
    with app_in("jwt", **nothing_required) as (app, _):
        assert _status(app, issuer.app_token(DAEMON)) == 200
        assert _status(app, issuer.token(ALICE.id, claims={"scp": "User.Read"})) == 200
        health = app.http.get("/api/health").json()
        assert "AUTH_ACCEPT_ANY_CLIENT=true" in health["auth"]["warning"]
        assert any("AUTH_ACCEPT_ANY_CLIENT=true" in warning for warning in health["warnings"])
        _refused(app, issuer.app_token(DAEMON, roles=[{"value": APP_ROLE}]), "insufficient_scope",
                 'Bearer error="insufficient_scope"')
    with app_in("jwt") as (app, _):  # required: no warning
        assert app.http.get("/api/health").json()["auth"]["warning"] is None
