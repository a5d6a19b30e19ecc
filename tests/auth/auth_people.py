"""The people of the identity tests and how they authenticate in each mode (a module of its own: test modules import
it by name; `conftest` is not importable by name once several test directories run together)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path

from local_issuer import LocalIssuer

AUTH_DIR = Path(__file__).resolve().parent
OBJECT_ID_CLAIM = "http://schemas.microsoft.com/identity/claims/objectidentifier"
TOKEN_SECRET = "auth-tests-continuation-secret"


@dataclass(frozen=True)
class Person:
    id: str
    name: str
    roles: tuple[str, ...] = ()


ALICE = Person("oid-alice", "Alice")
BOB = Person("oid-bob", "Bob")
CAROL = Person("oid-carol", "Carol", ("Payments.Approver",))
DAVE = Person("oid-dave", "Dave", ("Payments.Approver", "Publisher"))


def easyauth_headers(person: Person) -> dict[str, str]:
    """What App Service Authentication passes to the app for a signed-in Entra ID user."""
    claims = [
        {"typ": OBJECT_ID_CLAIM, "val": person.id},
        {"typ": "name", "val": person.name},
        *({"typ": "roles", "val": role} for role in person.roles),
    ]
    principal = {"auth_typ": "aad", "claims": claims, "name_typ": "name", "role_typ": "roles"}
    return {
        "X-MS-CLIENT-PRINCIPAL": base64.b64encode(json.dumps(principal).encode()).decode(),
        "X-MS-CLIENT-PRINCIPAL-ID": person.id,
        "X-MS-CLIENT-PRINCIPAL-NAME": person.name,
        "X-MS-CLIENT-PRINCIPAL-IDP": "aad",
    }


@dataclass
class Callers:
    """How each person authenticates in one mode, and who they then are to the app."""

    mode: str
    issuer: LocalIssuer | None = None
    settings: dict[str, str] = field(default_factory=dict)

    def headers(self, person: Person) -> dict[str, str]:
        if self.mode == "jwt":
            assert self.issuer is not None
            return self.issuer.headers(person.id, name=person.name, roles=list(person.roles))
        return easyauth_headers(person)  # `none` ignores them: everyone is `anonymous`

    def identity(self, person: Person) -> str:
        return "anonymous" if self.mode == "none" else person.id


def callers_for(mode: str, issuer: LocalIssuer) -> Callers:
    if mode == "jwt":
        return Callers("jwt", issuer, issuer.settings())
    return Callers(mode, None, {"AUTH_MODE": mode})


def app_env(model_url: str, **extra: str) -> dict[str, str]:
    return {
        "AGENTS_PACKAGE": "auth_agents",
        "WORKFLOWS_PACKAGE": "auth_workflows",
        "SCRIPTED_MODEL_URL": model_url,
        "MODEL_PROVIDER": "scripted",
        "CONTINUATION_TOKEN_SECRET": TOKEN_SECRET,
        "SESSION_STORE_PATH": ":memory:",
        **extra,
    }


