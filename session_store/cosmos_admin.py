"""Cosmos DB account plumbing: the client (auth + retry policy), the containers, and start-up creation.

Containers (names get ``COSMOS_CONTAINER_PREFIX`` in front); TTL is switched on (``default_ttl=-1``: nothing expires
unless an item carries its own ``ttl``), so the retention setting can change without touching the containers:

=============  ==============  ==========================================================================
container      partition key   items
=============  ==============  ==========================================================================
sessions       /sessionId      one per session (id = session id)
messages       /sessionId      one per message (id = message id); unique key /seq within a session
runs           /sessionId      one per run (id = run id)
approvals      /sessionId      one per approval request (id = approval id)
effects        /sessionId      one per recorded side effect (id = idempotency key)
lookup         /id             ``run:<run id>`` / ``approval:<approval id>`` -> sessionId (point-read index;
                               none for a run whose session is named after it, nor for its
                               approvals with ids "<run id>:...")
=============  ==============  ==========================================================================
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from azure.core.exceptions import AzureError
from azure.cosmos import PartitionKey
from azure.cosmos.aio import CosmosClient, DatabaseProxy
from azure.cosmos.exceptions import CosmosHttpResponseError
from urllib3.exceptions import InsecureRequestWarning

from .errors import StoreUnavailableError
from .settings import StoreSettings

# Throttling (429) and transient failures are retried by the SDK itself; these are its knobs, not our own loop.
RETRY_POLICY: dict[str, Any] = {
    "retry_throttle_total": 9,  # 429s: up to 9 retries honouring x-ms-retry-after-ms
    "retry_throttle_backoff_max": 30,  # ...within at most 30 s in total
    "retry_total": 5,  # connection/read failures and retryable status codes
    "retry_backoff_max": 10,
    "retry_backoff_factor": 0.5,
}


@dataclass(frozen=True)
class ContainerSpec:
    name: str
    partition_key: str = "/sessionId"
    unique_keys: tuple[str, ...] = ()
    # The only paths the store's queries filter or sort on (`tests/store/test_cosmos_indexing.py` checks every query
    # against them): everything else (message payloads, run inputs and outputs, tool arguments) is not indexed, so a
    # write pays for a handful of index terms instead of one per property of the payload.
    indexed_paths: tuple[str, ...] = ()

    def indexing_policy(self) -> dict[str, Any]:
        return {
            "indexingMode": "consistent",
            "automatic": True,
            "includedPaths": [{"path": path} for path in self.indexed_paths],
            "excludedPaths": [{"path": "/*"}],
        }


CONTAINERS: tuple[ContainerSpec, ...] = (
    ContainerSpec("sessions", indexed_paths=("/sessionId/?", "/agent/?", "/owner_id/?", "/createdEpoch/?")),
    ContainerSpec("messages", unique_keys=("/seq",), indexed_paths=("/sessionId/?", "/seq/?", "/run_id/?")),
    ContainerSpec("runs", indexed_paths=(
        "/sessionId/?", "/ordinal/?", "/owner_id/?", "/status/?", "/agent/?", "/createdEpoch/?", "/branched_from/?")),
    ContainerSpec("approvals", indexed_paths=(
        "/sessionId/?", "/run_id/?", "/status/?", "/decider_keys/[]/?", "/createdEpoch/?")),
    ContainerSpec("effects", indexed_paths=("/sessionId/?", "/type/?", "/kind/?", "/name/?", "/index/?")),
    ContainerSpec("lookup", partition_key="/id"),  # point reads only
)


def make_client(settings: StoreSettings) -> tuple[CosmosClient, Any]:
    """The aio client (call on the loop that will use it) and the credential object to close with it, if any."""
    if settings.cosmos_key is not None:
        credential: Any = settings.cosmos_key.get_secret_value()
        owned = None
    else:  # managed identity in Azure, developer login (az, azd, VS Code...) locally
        from azure.identity.aio import DefaultAzureCredential

        credential = owned = DefaultAzureCredential()
    client = CosmosClient(
        settings.cosmos_endpoint, credential=credential, user_agent_suffix="durable-agents-session-store",
        **RETRY_POLICY,
    )
    return client, owned


async def ensure_containers(client: CosmosClient, settings: StoreSettings) -> dict[str, Any]:
    """Create the database and containers if missing; return the container proxies by logical name."""
    database_name = settings.cosmos_database
    step = f"database {database_name!r}"
    try:
        database: DatabaseProxy = await client.create_database_if_not_exists(database_name)
        proxies = {}
        for spec in CONTAINERS:
            step = f"container {settings.cosmos_container_prefix + spec.name!r} in database {database_name!r}"
            proxies[spec.name] = await database.create_container_if_not_exists(
                id=settings.cosmos_container_prefix + spec.name,
                partition_key=PartitionKey(path=spec.partition_key),
                unique_key_policy=(
                    {"uniqueKeys": [{"paths": [path]} for path in spec.unique_keys]} if spec.unique_keys else None
                ),
                default_ttl=-1,
                indexing_policy=spec.indexing_policy(),
            )
            if settings.session_ttl_seconds is not None:
                await _require_ttl_enabled(proxies[spec.name], settings)
        return proxies
    except CosmosHttpResponseError as exc:
        hint = ""
        if exc.status_code in (401, 403):
            hint = (
                " The account refused: check COSMOS_KEY, or with Entra ID (no key) create the database and "
                "containers beforehand (data-plane roles cannot create them) and grant the identity the "
                "'Cosmos DB Built-in Data Contributor' role."
            )
        raise StoreUnavailableError(
            f"cannot open {step} at {settings.cosmos_endpoint}: HTTP {exc.status_code} {_first_line(exc)}.{hint}"
        ) from exc
    except AzureError as exc:
        endpoint = settings.cosmos_endpoint
        raise StoreUnavailableError(f"cannot reach Cosmos DB at {endpoint}: {_first_line(exc)}") from exc


async def _require_ttl_enabled(container: Any, settings: StoreSettings) -> None:
    """A container created elsewhere without TTL would silently ignore the retention setting: refuse to start."""
    properties = await container.read()
    if properties.get("defaultTtl") is None:
        raise StoreUnavailableError(
            f"SESSION_TTL_SECONDS is set but container {properties['id']!r} in database "
            f"{settings.cosmos_database!r} has time-to-live switched off, so items would never expire: switch it "
            "on with no default (Time to Live: On (no default), i.e. defaultTtl = -1)"
        )


def _first_line(exc: Exception) -> str:
    message = getattr(exc, "message", None) or str(exc)
    return message.strip().splitlines()[0] if message.strip() else type(exc).__name__


def drop_database(endpoint: str, key: str | None, name: str) -> None:
    """Delete a database if it exists (test and benchmark clean-up; synchronous client)."""
    from azure.cosmos import CosmosClient as SyncClient
    from azure.cosmos.exceptions import CosmosResourceNotFoundError

    if key is None:
        from azure.identity import DefaultAzureCredential

        credential: Any = DefaultAzureCredential()
    else:
        credential = key
    with warnings.catch_warnings():
        # The local test server's certificate is self-signed; the SDK skips verification for loopback hosts only.
        warnings.simplefilter("ignore", InsecureRequestWarning)
        client = SyncClient(endpoint, credential=credential)
        try:
            client.delete_database(name)
        except CosmosResourceNotFoundError:
            pass
        finally:
            client.close()
