"""Who is calling: the validated identity of a request, by `AUTH_MODE`.

- `none` (default): one principal, `anonymous`; the function key is the only gate (service to service). Principal
  headers are ignored: anyone can send them.
- `easyauth`: App Service Authentication in front of the app validated the caller and passes it in
  `X-MS-CLIENT-PRINCIPAL` (base64 JSON: `auth_typ`, `claims` [{`typ`, `val`}], `name_typ`, `role_typ`); the platform
  strips these headers from outside requests. No principal: 401 `unauthenticated`.
- `jwt`: the app validates `Authorization: Bearer <token>` itself (PyJWT, the issuer's signing keys from its OpenID
  discovery document's `jwks_uri`, issuer and audience checked), then what the token may do: its scope or app role,
  client and tenant (`token_access.py`). Principal headers are ignored.

Pure of Azure Functions: `authenticate(headers)` takes the request headers and returns a `Principal` or raises an
`ApiProblem` (401 with `WWW-Authenticate`, 400 `credential_repeated` for a credential header sent more than once,
403 `insufficient_scope` & co. for a valid token that may not call, or 503 when the issuer cannot be reached).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import threading
import urllib.request
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent_runs.deployment import (
    ACCEPT_ANY_CLIENT_SETTING,
    AuthMode,
    DeploymentSettings,
    assess_jwt_clients,
    normalized_auth_mode,
    setting_values,
)
from agent_runtime import json_limits
from agent_runtime.approvers import ANONYMOUS
from agent_runtime.settings_snapshot import current_settings
from http_api.problems import ApiProblem
from http_api.token_access import REFUSAL_DETAILS, AccessRefused, TokenAccess

if TYPE_CHECKING:
    import jwt  # PyJWT (and `cryptography` under it): imported by the first JwtValidator, AUTH_MODE=jwt only

log = logging.getLogger(__name__)

OBJECT_ID_CLAIM = "http://schemas.microsoft.com/identity/claims/objectidentifier"
ID_CLAIMS = (OBJECT_ID_CLAIM, "oid", "sub")
NAME_CLAIMS = ("name", "preferred_username", "upn", "email")
ROLE_CLAIMS = ("roles", "http://schemas.microsoft.com/ws/2008/06/identity/claims/role")
# The asymmetric algorithms a signing key may have (its own one is then the only one accepted for it).
JWT_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"})
# The Easy Auth headers naming who calls (`-NAME` is only shown, and a display name may hold a comma).
PRINCIPAL_HEADERS = ("x-ms-client-principal", "x-ms-client-principal-id")
# The request field each mode reads the caller and their roles from (`none` has no credential: one caller).
CREDENTIAL_FIELDS = {"easyauth": "header.x-ms-client-principal", "jwt": "header.Authorization"}
INVALID_TOKEN_DETAIL = "The bearer token is not valid."
DISCOVERY_TIMEOUT_SECONDS = 10


class AuthSettings(BaseSettings):
    """`AUTH_MODE` and, for `jwt`, the issuer to trust and what its tokens must carry to call."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, env_ignore_empty=True)

    mode: AuthMode = Field(default="none", validation_alias="AUTH_MODE")
    issuer: str | None = Field(default=None, validation_alias="AUTH_ISSUER")
    audience: str | None = Field(default=None, validation_alias="AUTH_AUDIENCE")
    openid_config_url: str | None = Field(default=None, validation_alias="AUTH_OPENID_CONFIG_URL")
    clock_skew_seconds: int = Field(default=60, ge=0, validation_alias="AUTH_CLOCK_SKEW_SECONDS")
    # How long the issuer's key set is trusted before it is fetched again: a key the issuer withdrew (rotated out,
    # or revoked after a leak) signs nothing accepted here once this has passed.
    jwks_cache_seconds: int = Field(default=3600, ge=1, le=86400, validation_alias="AUTH_JWKS_CACHE_SECONDS")
    # Lists: values separated by spaces and/or commas.
    required_scopes: str | None = Field(default=None, validation_alias="AUTH_REQUIRED_SCOPES")
    required_app_roles: str | None = Field(default=None, validation_alias="AUTH_REQUIRED_APP_ROLES")
    allowed_client_ids: str | None = Field(default=None, validation_alias="AUTH_ALLOWED_CLIENT_IDS")
    tenant_id: str | None = Field(default=None, validation_alias="AUTH_TENANT_ID")
    accept_any_client: bool = Field(default=False, validation_alias=ACCEPT_ANY_CLIENT_SETTING)

    @field_validator("mode", mode="before")
    @classmethod
    def _case_insensitive(cls, value: Any) -> Any:
        # An unknown mode never gets here: the start-up checks (agent_runs/deployment.py) refuse it by name.
        return normalized_auth_mode(value) if isinstance(value, str) else value

    def discovery_url(self) -> str:
        if self.openid_config_url:
            return self.openid_config_url
        if not self.issuer:
            raise ValueError("AUTH_MODE=jwt needs AUTH_ISSUER (and AUTH_AUDIENCE)")
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"

    def check(self) -> AuthSettings:
        if self.mode == "jwt" and not (self.issuer and self.audience):
            raise ValueError("AUTH_MODE=jwt needs AUTH_ISSUER and AUTH_AUDIENCE")
        if self.mode == "jwt" and (errors := self.client_checks()[0]):
            raise ValueError(errors[0])
        return self

    def client_checks(self) -> tuple[list[str], list[str]]:
        """(errors, warnings) of the scope and app role requirements (the start-up checks' own)."""
        return assess_jwt_clients(self.required_scopes, self.required_app_roles, self.accept_any_client)

    def access(self) -> TokenAccess:
        return TokenAccess(
            scopes=setting_values(self.required_scopes),
            app_roles=setting_values(self.required_app_roles),
            client_ids=setting_values(self.allowed_client_ids),
            tenant_id=(self.tenant_id or "").strip() or None,
        )


class Principal(BaseModel):
    """The validated caller. `id` is what owns sessions and runs; `roles` are app roles (approvers by role)."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(min_length=1)
    name: str | None = None
    roles: tuple[str, ...] = ()
    auth_type: AuthMode

    @property
    def trusted(self) -> bool:
        """`none` mode: the single principal is whoever holds the function key, trusted as every approver."""
        return self.auth_type == "none"


NO_AUTH_PRINCIPAL = Principal(id=ANONYMOUS, name=ANONYMOUS, auth_type="none")


def channel_principal(principal_id: str, roles: Sequence[str]) -> Principal:
    """An identity another channel vouches for (a Slack user, mapped by `SLACK_APPROVERS`), judged as a caller of the
    current `AUTH_MODE` is. The mode is the authenticator's, normalized: the raw `AUTH_MODE` text ("EasyAuth", "JWT",
    which the app accepts) once made such a principal `none`'s trusted one, who decides every approval of its runs."""
    mode = authenticator().settings.mode
    return Principal(id=principal_id, name=principal_id, roles=tuple(roles), auth_type=mode)


def challenge(scheme: str, error: str | None = None) -> dict[str, str]:
    """The `WWW-Authenticate` header of a refusal (RFC 6750 section 3: the scheme, with the error code if any)."""
    return {"WWW-Authenticate": scheme if error is None else f'{scheme} error="{error}"'}


def unauthenticated(detail: str, *, scheme: str, error: str | None = None, field: str | None = None) -> ApiProblem:
    return ApiProblem(401, "unauthenticated", "Authentication required", detail, field=field,
                      headers=challenge(scheme, error))


def check_sent_once(headers: Mapping[str, str], header: str, *, field: str, detail: str, scheme: str,
                    error: str | None = None) -> None:
    """Refuses a credential header whose one value never holds a comma (a bearer token, base64, an object id) that
    came more than once: the Functions host hands the worker a repeated header's values comma-joined
    (`RpcHttp.headers`, and `fastapi_bridge.host_headers` likewise), so two credentials read as "a,b". That is
    refused, never read as either one: which of two identities a front end or a client meant is not ours to guess.
    A malformed request, not a missing or bad credential: 400, as RFC 6750 section 3.1 pairs `invalid_request`
    with (a 401 would tell a client to sign in again, which sends the same two headers)."""
    if "," in (headers.get(header) or ""):
        raise ApiProblem(400, "credential_repeated", "Credential sent more than once", detail, field=field,
                         headers=challenge(scheme, error))


# ------------------------------------------------------------------------------------------------ Easy Auth


class _Claim(BaseModel):
    typ: str
    val: str


class _ClientPrincipal(BaseModel):
    auth_typ: str | None = None
    claims: list[_Claim] = Field(default_factory=list)
    name_typ: str | None = None
    role_typ: str | None = None


def easyauth_principal(headers: Mapping[str, str]) -> Principal:
    for header in PRINCIPAL_HEADERS:
        check_sent_once(headers, header, field=f"header.{header}", scheme="EasyAuth",
                        detail="App Service Authentication sent more than one principal.")
    encoded = headers.get("x-ms-client-principal")
    if not encoded:
        raise unauthenticated("Sign in: App Service Authentication sent no principal.", scheme="EasyAuth")
    try:
        raw = base64.b64decode(encoded + "=" * (-len(encoded) % 4), altchars=b"-_" if "-" in encoded else None)
        parsed = _ClientPrincipal.model_validate(json_limits.loads(raw))  # nesting bounded: a header is ~32 KB
    except (binascii.Error, ValueError, ValidationError, UnicodeDecodeError) as error:
        raise unauthenticated("X-MS-CLIENT-PRINCIPAL is not a valid principal.", scheme="EasyAuth") from error
    claims: dict[str, list[str]] = {}
    for claim in parsed.claims:
        claims.setdefault(claim.typ, []).append(claim.val)
    principal_id = next((claims[c][0] for c in ID_CLAIMS if claims.get(c)), None)
    principal_id = principal_id or headers.get("x-ms-client-principal-id")
    if not principal_id:
        raise unauthenticated("The principal has no object id, subject or principal id.", scheme="EasyAuth")
    name_claims = (parsed.name_typ, *NAME_CLAIMS) if parsed.name_typ else NAME_CLAIMS
    name = next((claims[c][0] for c in name_claims if claims.get(c)), None) or headers.get(
        "x-ms-client-principal-name"
    )
    role_claims = {*ROLE_CLAIMS, *([parsed.role_typ] if parsed.role_typ else [])}
    roles = tuple(dict.fromkeys(role for c in role_claims for role in claims.get(c, [])))
    return Principal(id=principal_id, name=name, roles=roles, auth_type="easyauth")


# ------------------------------------------------------------------------------------------------ JWT


class IssuerUnavailable(Exception):
    """The issuer's discovery document or keys could not be fetched (503, not the caller's fault)."""


class InvalidToken(Exception):
    """Anything wrong with the caller's token (401 with one fixed message: nothing of the token is echoed)."""


class JwtValidator:
    """Validates bearer tokens against the issuer's keys (found through OpenID discovery, cached by PyJWKClient).

    The algorithm is the key's, never the token's: a JWK's `alg`, or for a key without one (Entra ID publishes none)
    the one its type implies (RSA: RS256). A token whose header names another algorithm (PS256, ES256, HS256 with
    the public key as secret, `none`) is refused, whatever its signature."""

    def __init__(self, settings: AuthSettings) -> None:
        self._settings = settings.check()
        self._access = settings.access()
        self._lock = threading.Lock()
        self._jwks: jwt.PyJWKClient | None = None

    def _jwks_client(self) -> jwt.PyJWKClient:
        import jwt  # AUTH_MODE=jwt only: PyJWT and `cryptography` stay out of every other cold start

        with self._lock:
            if self._jwks is None:
                url = self._settings.discovery_url()
                try:
                    with urllib.request.urlopen(url, timeout=DISCOVERY_TIMEOUT_SECONDS) as response:
                        document = json.load(response)
                    jwks_uri = document["jwks_uri"]
                except (OSError, ValueError, KeyError, TypeError) as error:
                    raise IssuerUnavailable(f"OpenID discovery at {url} failed: {error}") from error
                # The key set is cached (`jwks_cache_seconds`) and refreshed at most every 30 s for an unknown
                # `kid` (PyJWT's cooldown); never per-key (`cache_keys`): that cache has no expiry, so a key the
                # issuer removed from its set stayed trusted for the life of the process.
                self._jwks = jwt.PyJWKClient(
                    jwks_uri, cache_keys=False, lifespan=self._settings.jwks_cache_seconds,
                    timeout=DISCOVERY_TIMEOUT_SECONDS,
                )
            return self._jwks

    def _signing_key(self, token: str) -> jwt.PyJWK:
        import jwt

        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.PyJWTError as error:
            raise InvalidToken("malformed token") from error
        if not isinstance(kid, str) or not kid:
            raise InvalidToken("no key id")
        client = self._jwks_client()
        try:
            key = client.get_signing_key(kid)
        except jwt.PyJWKClientConnectionError as error:
            raise IssuerUnavailable(str(error)) from error
        except jwt.PyJWTError as error:  # no key with this id (after one refresh), or a key PyJWT cannot use
            raise InvalidToken("unknown key") from error
        if key.algorithm_name not in JWT_ALGORITHMS:  # e.g. an `oct` key (HS256): never a shared secret
            raise InvalidToken(f"key algorithm {key.algorithm_name} is not accepted")
        return key

    def validate(self, token: str) -> dict[str, Any]:
        """The token's claims; raises `InvalidToken` for any problem with the token, `IssuerUnavailable` when the
        issuer's keys cannot be fetched."""
        import jwt

        key = self._signing_key(token)
        try:
            return jwt.decode(
                token,
                key.key,
                algorithms=[key.algorithm_name],  # pinned to the key
                audience=self._settings.audience,
                issuer=self._settings.issuer,
                leeway=self._settings.clock_skew_seconds,
                options={"require": ["exp", "iss", "aud"]},
            )
        except Exception as error:  # a caller's token can make PyJWT raise more than PyJWTError: each is a 401
            raise InvalidToken(type(error).__name__) from error

    def principal(self, headers: Mapping[str, str]) -> Principal:
        authorization = headers.get("authorization") or ""
        scheme, _, token = authorization.partition(" ")
        # The scheme first: another scheme's one credential may hold commas (`Digest a=1, b=2`), a bearer token never.
        if scheme.lower() != "bearer" or not token.strip():
            raise unauthenticated("Send Authorization: Bearer <token>.", scheme="Bearer")
        check_sent_once(headers, "authorization", field=CREDENTIAL_FIELDS["jwt"], scheme="Bearer",
                        error="invalid_request", detail="Send one Authorization: Bearer <token> header.")
        try:
            claims = self.validate(token.strip())
        except InvalidToken as error:
            log.info("bearer token refused: %s", error)  # the reason only, never the token or its header values
            raise _invalid_token() from error
        except IssuerUnavailable as error:
            log.warning("cannot reach the token issuer's keys: %s", error)
            raise ApiProblem(503, "auth_unavailable", "Cannot validate tokens right now",
                             "The token issuer's keys could not be fetched; retry later.",
                             headers={"Retry-After": "5"}) from error
        principal_id = next((str(claims[c]) for c in ID_CLAIMS if claims.get(c)), None)
        if not principal_id:
            raise _invalid_token()
        try:
            roles = self._access.check(claims)
        except AccessRefused as refused:
            log.info("bearer token of %.80r not allowed: %s", principal_id, refused)  # who and why; never the token
            raise ApiProblem(403, refused.code, "Not allowed", REFUSAL_DETAILS[refused.code],
                             headers={"WWW-Authenticate": self._access.challenge}) from refused
        name = next((str(claims[c]) for c in NAME_CLAIMS if claims.get(c)), None)
        return Principal(id=principal_id, name=name, roles=roles, auth_type="jwt")


def _invalid_token() -> ApiProblem:
    """One answer for every token problem (expired, wrong audience or issuer, unknown key, wrong algorithm, no
    subject, malformed): the caller's `kid` and the library's text stay out of the response."""
    return unauthenticated(INVALID_TOKEN_DETAIL, scheme="Bearer", error="invalid_token")


# ------------------------------------------------------------------------------------------------ the mode


class Authenticator:
    def __init__(self, settings: AuthSettings) -> None:
        self.settings = settings
        self._jwt = JwtValidator(settings) if settings.mode == "jwt" else None
        if self._jwt is not None:
            for warning in settings.client_checks()[1]:
                log.warning("%s", warning)

    async def authenticate(self, headers: Mapping[str, str]) -> Principal:
        if self.settings.mode == "easyauth":
            return easyauth_principal(headers)
        if self._jwt is not None:
            return await asyncio.to_thread(self._jwt.principal, headers)  # JWKS fetches block
        return NO_AUTH_PRINCIPAL

    def health(self, deployment: DeploymentSettings) -> dict[str, Any]:
        """What `GET /api/health` says about identities: the mode, a warning for `none` on Azure or for `jwt` that
        accepts any client (`AUTH_ACCEPT_ANY_CLIENT=true`), and whether the page may offer its principal picker
        (`local_principal_picker`: Easy Auth mode where no App Service front can exist, i.e. devhost or `func start`;
        the page never guesses it from a failed `/.auth/me`)."""
        on_azure = deployment.on_azure
        report: dict[str, Any] = {
            "mode": self.settings.mode,
            "warning": None,
            "local_principal_picker": self.settings.mode == "easyauth" and not on_azure,
        }
        if self.settings.mode == "none" and on_azure:
            report["warning"] = (
                "AUTH_MODE=none on Azure: every function-key holder is the same principal and may see and decide "
                "everything; set AUTH_MODE=easyauth or jwt to tell callers apart."
            )
        if self.settings.mode == "jwt":
            report["warning"] = next(iter(self.settings.client_checks()[1]), None)
        return report


_authenticators: dict[str, Authenticator] = {}
_authenticators_lock = threading.Lock()


def authenticator() -> Authenticator:
    """The authenticator for the current settings (read on each request: rebuilt when the environment changed; one
    authenticator, with its cached JWKS, per distinct configuration)."""
    settings = current_settings(AuthSettings)
    key = settings.model_dump_json()
    with _authenticators_lock:
        found = _authenticators.get(key)
        if found is None:
            found = _authenticators[key] = Authenticator(settings)
        return found
