"""A local OpenID token issuer on loopback for the `AUTH_MODE=jwt` tests: the discovery document, a JWKS, and RS256
tokens signed with a `cryptography` RSA key (no cloud). Tokens from a second, unknown key test signature checks.

Its tokens look like Entra ID's: a user's (delegated) token carries the API's scope in `scp`
(`access_as_user`), a daemon's (app-only, `app_token`) has no `scp`, `oid` = `sub`, `idtyp` = `app`, and its app roles;
both name the tenant (`tid`) and the client application (`azp`)."""

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
SCOPE = "access_as_user"  # the scope the API exposes (Entra: *Expose an API*)
APP_ROLE = "Agents.Invoke"  # the app role daemons are granted (Entra: *App roles*, member type Applications)
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
CLIENT = "0c5c7a8e-2f1a-4a6e-9b1e-4d1f6f0c9e11"  # the client application tokens are issued to (`azp`)


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
            "AUTH_REQUIRED_SCOPES": SCOPE,
            "AUTH_REQUIRED_APP_ROLES": APP_ROLE,
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
        claims: dict[str, Any] | None = None,
    ) -> str:
        """A user's token for `oid` (delegated: `scp` is the API's scope); by default RS256 with the issuer's key and
        its `kid`. `algorithm`, `signing_key` and `header` (merged over `{"kid": kid}`) make the tokens an attacker
        would: another algorithm, another key, a hostile header; `claims` are merged over the token's own (a claim
        set to None is left out)."""
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": issuer or self.issuer, "aud": audience, "oid": oid, "sub": f"sub-{oid}", "scp": SCOPE,
            "tid": TENANT, "azp": CLIENT, "ver": "2.0", "iat": now, "nbf": now - 5, "exp": now + int(expires_in),
        }
        if name:
            payload["name"] = name
        if roles:
            payload["roles"] = roles
        payload = {k: v for k, v in {**payload, **(claims or {})}.items() if v is not None}
        key = signing_key if signing_key is not None else self.foreign_key if foreign else self.key
        return jwt.encode(payload, key, algorithm=algorithm, headers={"kid": self.kid, **(header or {})})

    def app_token(self, oid: str, *, roles: list[str] | None = None, **claims: Any) -> str:
        """A daemon's token (client credentials): app-only as Entra ID makes it - no `scp`, `sub` = `oid`, `idtyp`
        = `app` - with the app roles granted to it (`roles`)."""
        return self.token(oid, claims={"scp": None, "sub": oid, "idtyp": "app", "roles": roles, **claims})

    def headers(self, oid: str, **kwargs: Any) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(oid, **kwargs)}"}
