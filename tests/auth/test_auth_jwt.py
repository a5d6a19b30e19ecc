"""`AUTH_MODE=jwt` against tokens an attacker would send: real JWTs signed by the local issuer's RSA key with another
algorithm, by keys of other types, with hostile headers. The algorithm is pinned to the issuer's key (RS256); every
token problem is a 401 with one fixed message (no `kid`, no library text), never a 500."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid

import jwt
from auth_people import ALICE
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from local_issuer import LocalIssuer

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
                            openid_config_url=f"http://127.0.0.1:{closed}/.well-known/openid-configuration")
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
