"""Function keys, when asked (`--function-keys FILE`): `authLevel` enforced as the Functions host does.

`func start` checks no keys, so devhost does not either unless given a keys file. With one, an HTTP trigger whose
binding says `authLevel: function` needs that function's key, a host key or the master key; `admin` needs the master
key; `anonymous` needs nothing. The key comes from the `x-functions-key` header, else the `code` query parameter; a
missing or wrong key gets 401 with no body. The Durable webhooks (`/runtime/webhooks/durabletask/...`) then need the
extension's system key (`systemKeys.durabletask_extension`, else the master key), which the client binding's links
carry as `code=`, as on Azure; the client's local RPC endpoint needs none. The file (devhost's, standing in for the
secrets Azure keeps in storage):

    {"masterKey": "...", "hostKeys": {"default": "..."}, "functionKeys": {"<function>": {"default": "..."}},
     "systemKeys": {"durabletask_extension": "..."}}
"""

from __future__ import annotations

import hmac
import json
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .host_config import HostConfigError
from .query import QueryArgs

KEY_HEADER = "x-functions-key"
KEY_QUERY = "code"
# HttpTriggerAttribute's default when a binding names no authLevel.
DEFAULT_AUTH_LEVEL = "function"
DURABLE_SYSTEM_KEY = "durabletask_extension"


class FunctionKeys(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    master_key: str = Field(alias="masterKey", min_length=1)
    host_keys: dict[str, str] = Field(default_factory=dict, alias="hostKeys")
    function_keys: dict[str, dict[str, str]] = Field(default_factory=dict, alias="functionKeys")
    # `durabletask_extension`: the Durable extension's system key, which its webhooks require (else the master key).
    system_keys: dict[str, str] = Field(default_factory=dict, alias="systemKeys")

    @property
    def durable_webhook_key(self) -> str:
        """The key the client binding's links carry (`code=`), as the extension puts its system key there."""
        return self.system_keys.get(DURABLE_SYSTEM_KEY) or self.master_key

    def allows_durable_webhook(self, presented: str | None) -> bool:
        return bool(presented) and _matches(presented or "", [self.master_key, self.durable_webhook_key])

    @classmethod
    def load(cls, path: str | Path) -> FunctionKeys:
        try:
            document: Any = json.loads(Path(path).read_text(encoding="utf-8-sig"))
            return cls.model_validate(document)
        except (OSError, ValueError, ValidationError) as exc:
            raise HostConfigError(f"{path}: cannot use this function keys file: {exc}") from exc

    def allows(self, auth_level: str, function_name: str, presented: str | None) -> bool:
        level = auth_level.lower()
        if level == "anonymous":
            return True
        if not presented:
            return False
        if _matches(presented, [self.master_key]):
            return True
        if level != "function":
            return False  # admin: the master key only (system and user levels are not for HTTP callers here)
        own = next((keys for name, keys in self.function_keys.items() if name.lower() == function_name.lower()), {})
        return _matches(presented, [*self.host_keys.values(), *own.values()])


def presented_key(request: web.Request) -> str | None:
    """The key as the host reads it (azure-functions-host `src/WebJobs.Script.WebHost/Security/Authentication/Keys/
    AuthenticationLevelHandler.cs`, GetAuthorizationKeyInfoAsync, lines 89-97 at 89dc438): the header when it is
    there at all, else the query parameter, the first value of either (`values.First()`, not the comma-joined
    `ToString()` a function sees). An empty header is no key, and the query is then not read. The parameter's name
    is matched in any case (`?Code=`, `?CODE=`): `request.Query` is ASP.NET Core's query collection, whose names
    compare with `StringComparer.OrdinalIgnoreCase` (dotnet/aspnetcore `src/Http/Http/src/Features/QueryFeature.cs`,
    `KvpAccumulator`), values of names differing in case joined in URL order."""
    if KEY_HEADER in request.headers:
        return request.headers.get(KEY_HEADER) or None
    return QueryArgs(request.query).first(KEY_QUERY) or None


def auth_level(bindings: list[dict[str, Any]]) -> str:
    trigger = next((b for b in bindings if b.get("type") == "httpTrigger"), {})
    return str(trigger.get("authLevel") or DEFAULT_AUTH_LEVEL).lower()


def _matches(presented: str, keys: list[str]) -> bool:
    found = False
    for key in keys:  # compare against every key: the time taken does not say which one matched
        found |= hmac.compare_digest(presented.encode(), key.encode())
    return found
