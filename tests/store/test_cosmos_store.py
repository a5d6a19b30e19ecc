"""Cosmos-specific behaviour beyond the shared contract: selection, start-up, item layout, unreachable accounts."""

from __future__ import annotations

import pytest
from azure.cosmos import CosmosClient, PartitionKey
from store_helpers import message, new_session, run

from cosmos_local import EMULATOR_KEY
from session_store import StoreSettings, StoreUnavailableError, open_store
from session_store.cosmos_store import CosmosSessionStore

pytestmark = pytest.mark.cosmos


@pytest.fixture
def settings(cosmos_account: tuple[str, str | None, bool], cosmos_database: str) -> StoreSettings:
    endpoint, key, _ = cosmos_account
    return StoreSettings(COSMOS_ENDPOINT=endpoint, COSMOS_KEY=key, COSMOS_DATABASE=cosmos_database,
                         COSMOS_CONTAINER_PREFIX="app1-", SESSION_TTL_SECONDS=3600)


async def test_open_store_picks_cosmos_from_the_environment(
    settings: StoreSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COSMOS_ENDPOINT", settings.cosmos_endpoint)
    monkeypatch.setenv("COSMOS_KEY", settings.cosmos_key.get_secret_value())
    monkeypatch.setenv("COSMOS_DATABASE", settings.cosmos_database)
    store = open_store()
    try:
        assert isinstance(store, CosmosSessionStore)
        assert (await store.create_session("env-session", "assistant")).session_id == "env-session"
    finally:
        await store.close()


async def test_items_are_laid_out_as_documented(settings: StoreSettings) -> None:
    store = open_store(settings)
    again = open_store(settings)  # start-up is idempotent: containers already exist
    try:
        session_id = await new_session(store)
        started = await store.begin_run(run(session_id))
        await store.append_messages(session_id, [message(session_id, 0, run_id=started.run_id)])
        assert (await again.get_run(started.run_id)).run_id == started.run_id
    finally:
        await store.close()
        await again.close()

    client = CosmosClient(settings.cosmos_endpoint, credential=settings.cosmos_key.get_secret_value())
    try:
        database = client.get_database_client(settings.cosmos_database)
        names = {c["id"] for c in database.list_containers()}
        assert {f"app1-{n}" for n in ("sessions", "messages", "runs", "approvals", "effects", "lookup")} <= names
        messages = database.get_container_client("app1-messages")
        item = messages.read_item(f"{session_id}-m0", partition_key=session_id)
        assert (item["sessionId"], item["seq"], item["run_id"], item["type"], item["ttl"]) == (
            session_id, 0, started.run_id, "message", 3600,
        )
        assert messages.read()["partitionKey"]["paths"] == ["/sessionId"]
        policy = messages.read().get("indexingPolicy", {})
        assert policy.get("excludedPaths") == [{"path": "/*"}], policy  # payloads are not indexed
        lookup_id = f"run:{started.run_id}"
        lookup = database.get_container_client("app1-lookup").read_item(lookup_id, partition_key=lookup_id)
        assert lookup["sessionId"] == session_id
    finally:
        client.close()


def test_an_unreachable_account_is_a_clear_store_error() -> None:
    settings = StoreSettings(COSMOS_ENDPOINT="https://127.0.0.1:9/", COSMOS_KEY=EMULATOR_KEY)  # port 9: nothing listens
    with pytest.raises(StoreUnavailableError, match=r"cannot reach Cosmos DB at https://127\.0\.0\.1:9/"):
        open_store(settings)


def test_retention_needs_ttl_switched_on_in_existing_containers(settings: StoreSettings, cosmos_database: str) -> None:
    client = CosmosClient(settings.cosmos_endpoint, credential=settings.cosmos_key.get_secret_value())
    try:
        database = client.create_database_if_not_exists(cosmos_database)
        database.create_container("nottl-sessions", partition_key=PartitionKey(path="/sessionId"))
    finally:
        client.close()
    with pytest.raises(StoreUnavailableError, match="time-to-live switched off"):
        open_store(settings.model_copy(update={"cosmos_container_prefix": "nottl-"}))
