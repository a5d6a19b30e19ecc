"""A local OpenID token issuer on loopback for the `AUTH_MODE=jwt` tests: the discovery document, a JWKS, and RS256
tokens signed with a `cryptography` RSA key (no cloud). Tokens from a second, unknown key test signature checks."""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

AUDIENCE = "api://durable-agents-tests"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class LocalIssuer:
    def __init__(self) -> None:
        self.key = _key()
        self.kid = uuid.uuid4().hex
        self.foreign_key = _key()  # signs tokens the issuer's JWKS does not vouch for
        self.jwks_requests = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": issuer.issuer, "jwks_uri": f"{issuer.issuer}/keys"}
                elif self.path == "/keys":
                    issuer.jwks_requests += 1
                    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(issuer.key.public_key()))
                    body = {"keys": [{**public, "kid": issuer.kid, "use": "sig", "alg": "RS256"}]}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> LocalIssuer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def rotate(self) -> tuple[rsa.RSAPrivateKey, str]:
        """Sign with a new key from now on and publish only that one (the old key withdrawn, as after a leak);
        returns the withdrawn key and its `kid`, to make the tokens whoever holds it would make."""
        withdrawn = (self.key, self.kid)
        self.key, self.kid = _key(), uuid.uuid4().hex
        return withdrawn

    def settings(self) -> dict[str, str]:
        return {
            "AUTH_MODE": "jwt",
            "AUTH_ISSUER": self.issuer,
            "AUTH_AUDIENCE": AUDIENCE,
            "AUTH_OPENID_CONFIG_URL": f"{self.issuer}/.well-known/openid-configuration",
        }

    def token(
        self,
        oid: str,
        *,
        name: str | None = None,
        roles: list[str] | None = None,
        audience: str = AUDIENCE,
        expires_in: float = 3600,
        foreign: bool = False,
        issuer: str | None = None,
        algorithm: str = "RS256",
        signing_key: Any = None,
        header: dict[str, Any] | None = None,
    ) -> str:
        """A token for `oid`; by default RS256 with the issuer's key and its `kid`. `algorithm`, `signing_key` and
        `header` (merged over `{"kid": kid}`) make the tokens an attacker would: another algorithm, another key, a
        hostile header."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": issuer or self.issuer, "aud": audience, "oid": oid, "sub": f"sub-{oid}",
            "iat": now, "nbf": now - 5, "exp": now + int(expires_in),
        }
        if name:
            claims["name"] = name
        if roles:
            claims["roles"] = roles
        key = signing_key if signing_key is not None else self.foreign_key if foreign else self.key
        return jwt.encode(claims, key, algorithm=algorithm, headers={"kid": self.kid, **(header or {})})

    def headers(self, oid: str, **kwargs: Any) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(oid, **kwargs)}"}
