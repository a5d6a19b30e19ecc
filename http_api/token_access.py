"""What a valid bearer token may do here (`AUTH_MODE=jwt`): a signature, `iss`, `aud` and `exp` only say that the
issuer made the token for this API, and on Entra ID any client application of the tenant can get such a token (client
credentials with `.default`: no `scp`, no `roles`). So, as Microsoft.Identity.Web's `RequiredScopeOrAppPermission`:

- a delegated token (it has `scp`, and Entra's `idtyp` is not `app`) must carry one of `AUTH_REQUIRED_SCOPES` in its
  space-separated `scp`;
- any other token is app-only (Entra: `idtyp` = `app`, no `scp`, `oid` = `sub`) and must carry one of
  `AUTH_REQUIRED_APP_ROLES` in its `roles` array;
- `AUTH_ALLOWED_CLIENT_IDS`: the client (`azp`, v2 tokens; `appid`, v1) must be one of them; `AUTH_TENANT_ID`: `tid`.

Claims are hostile: a claim of another type, or past the bounds below, refuses the token (403), never an error."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

# Bounds on what a claim may hold, far above what Entra ID issues: a claim past them refuses the token.
MAX_SCOPE_CLAIM_CHARS = 4096
MAX_ROLES = 256
MAX_ROLE_CHARS = 256
# RFC 6750 3: a scope in `WWW-Authenticate` is NQCHAR (no quote, no backslash, no space).
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5B\x5D-\x7E]+")

INSUFFICIENT_SCOPE = "insufficient_scope"
CLIENT_NOT_ALLOWED = "client_not_allowed"
TENANT_NOT_ALLOWED = "tenant_not_allowed"
REFUSAL_DETAILS = {
    INSUFFICIENT_SCOPE: "The token carries none of the scopes (delegated) or app roles (app-only) this API requires.",
    CLIENT_NOT_ALLOWED: "The token was issued to a client application this API does not accept.",
    TENANT_NOT_ALLOWED: "The token was issued in a tenant this API does not accept.",
}


class AccessRefused(Exception):
    """A valid token that may not call this API: `code` is the problem's, the message a reason for the log (no claim
    value in it)."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code


def roles_claim(claims: Mapping[str, Any]) -> tuple[str, ...]:
    """The token's `roles` (absent: none); anything but a bounded array of strings refuses the token: the roles
    decide approvals, so a claim that cannot be read grants nothing and is not guessed at."""
    value = claims.get("roles", [])
    if (
        not isinstance(value, list)
        or len(value) > MAX_ROLES
        or not all(isinstance(role, str) and 0 < len(role) <= MAX_ROLE_CHARS for role in value)
    ):
        raise AccessRefused(INSUFFICIENT_SCOPE, "the roles claim is not an array of strings within bounds")
    return tuple(dict.fromkeys(value))


def _scopes_claim(value: Any) -> set[str]:
    if not isinstance(value, str) or len(value) > MAX_SCOPE_CLAIM_CHARS:
        raise AccessRefused(INSUFFICIENT_SCOPE, "the scp claim is not a string within bounds")
    return set(value.split(" "))


def _same_id(value: Any, accepted: tuple[str, ...]) -> bool:
    """Client and tenant ids are GUIDs (or URIs): compared without case, as Entra ID does."""
    return isinstance(value, str) and value.casefold() in accepted


class TokenAccess(BaseModel):
    """The checks on a validated token's claims, from the settings (see the module's text)."""

    model_config = ConfigDict(frozen=True)

    scopes: tuple[str, ...] = ()
    app_roles: tuple[str, ...] = ()
    client_ids: tuple[str, ...] = ()
    tenant_id: str | None = None

    @property
    def challenge(self) -> str:
        """RFC 6750 3.1: the insufficient_scope challenge, naming the scopes a delegated token needs."""
        scopes = " ".join(scope for scope in self.scopes if _SCOPE_TOKEN.fullmatch(scope))
        return 'Bearer error="insufficient_scope"' + (f', scope="{scopes}"' if scopes else "")

    def check(self, claims: Mapping[str, Any]) -> tuple[str, ...]:
        """The token's app roles, once its claims pass; raises `AccessRefused` otherwise."""
        roles = roles_claim(claims)
        if self.tenant_id is not None and not _same_id(claims.get("tid"), (self.tenant_id.casefold(),)):
            raise AccessRefused(TENANT_NOT_ALLOWED, "the tid claim is not AUTH_TENANT_ID")
        if self.client_ids:
            client = claims["azp"] if "azp" in claims else claims.get("appid")
            if not _same_id(client, tuple(client_id.casefold() for client_id in self.client_ids)):
                raise AccessRefused(CLIENT_NOT_ALLOWED, "the client (azp/appid) is not in AUTH_ALLOWED_CLIENT_IDS")
        if not (self.scopes or self.app_roles):
            return roles  # AUTH_ACCEPT_ANY_CLIENT=true: nothing required, on purpose (the start-up checks say so)
        if "scp" in claims and claims.get("idtyp") != "app":
            if _scopes_claim(claims["scp"]).isdisjoint(self.scopes):
                raise AccessRefused(INSUFFICIENT_SCOPE, "a delegated token without any of AUTH_REQUIRED_SCOPES")
        elif set(roles).isdisjoint(self.app_roles):
            raise AccessRefused(INSUFFICIENT_SCOPE, "an app-only token without any of AUTH_REQUIRED_APP_ROLES")
        return roles
