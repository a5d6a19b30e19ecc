"""The local Cosmos server and its compatibility layer: pins the behaviour our store relies on.

If ``@vercel/cosmosdb-server`` changes (upgrade, different install), these fail loudly before the contract suite
starts giving misleading results. Only meaningful against the local server, so skipped on a real account.
"""

from __future__ import annotations

import http.client
import json
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from azure.cosmos import CosmosClient, PartitionKey
from azure.cosmos.exceptions import CosmosHttpResponseError, CosmosResourceNotFoundError

from cosmos_local import ROOT, advance_clock, server_info, start_local_cosmos

pytestmark = pytest.mark.cosmos
PINNED = "1.0.1"


@pytest.fixture(scope="module")
def local(cosmos_account: tuple[str, str | None, bool]) -> tuple[str, str]:
    endpoint, key, real = cosmos_account
    if real:
        pytest.skip("COSMOS_ENDPOINT points at a real account: the local server is not used")
    return endpoint, key


@pytest.fixture(scope="module")
def database(local: tuple[str, str]) -> Iterator:
    endpoint, key = local
    client = CosmosClient(endpoint, credential=key)
    db = client.create_database(f"compat-{uuid.uuid4().hex[:8]}")
    yield db
    client.delete_database(db.id)
    client.close()


def _container(database, *, ttl: int | None = -1, unique: str | None = None):
    return database.create_container(
        id=f"c-{uuid.uuid4().hex[:8]}",
        partition_key=PartitionKey(path="/sessionId"),
        default_ttl=ttl,
        unique_key_policy={"uniqueKeys": [{"paths": [unique]}]} if unique else None,
    )


def test_the_pinned_package_version_is_what_runs(local: tuple[str, str]) -> None:
    assert server_info(local[0])["version"] == PINNED
    assert json.loads((ROOT / "package.json").read_text())["dependencies"]["@vercel/cosmosdb-server"] == PINNED
    lock = json.loads((ROOT / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/@vercel/cosmosdb-server"]["version"] == PINNED


def test_missing_item_is_404_not_500(database) -> None:
    container = _container(database)
    container.upsert_item({"id": "present", "sessionId": "s1"})
    for item_id, partition in (("absent", "s1"), ("present", "other-partition")):
        with pytest.raises(CosmosResourceNotFoundError):
            container.read_item(item_id, partition_key=partition)
    container.delete_item("present", partition_key="s1")
    with pytest.raises(CosmosResourceNotFoundError):
        container.read_item("present", partition_key="s1")


def test_ttl_is_enforced_on_reads_queries_and_unique_checks(local: tuple[str, str], database) -> None:
    container = _container(database, unique="/seq")
    container.upsert_item({"id": "short", "sessionId": "s", "seq": 1, "ttl": 100})
    container.upsert_item({"id": "forever", "sessionId": "s", "seq": 2})
    # _ts has one-second resolution (as in Cosmos): keep a second of margin on both sides of the 100 s TTL.
    advance_clock(local[0], 98)
    assert container.read_item("short", partition_key="s")["id"] == "short"
    advance_clock(local[0], 3)
    with pytest.raises(CosmosResourceNotFoundError):
        container.read_item("short", partition_key="s")
    ids = [i["id"] for i in container.query_items("SELECT * FROM c WHERE c.sessionId = 's'", partition_key="s")]
    assert ids == ["forever"]
    container.create_item({"id": "reuses-seq", "sessionId": "s", "seq": 1})  # the expired item no longer owns it


def test_item_ttl_is_ignored_when_the_container_has_ttl_off(local: tuple[str, str], database) -> None:
    container = _container(database, ttl=None)
    container.upsert_item({"id": "kept", "sessionId": "s", "ttl": 1})
    advance_clock(local[0], 5)
    assert container.read_item("kept", partition_key="s")["id"] == "kept"


def test_items_over_two_megabytes_are_refused_with_413(database) -> None:
    container = _container(database)
    container.upsert_item({"id": "fits", "sessionId": "s", "blob": "x" * (2 * 1024 * 1024 - 100)})
    with pytest.raises(CosmosHttpResponseError) as caught:
        container.upsert_item({"id": "too-big", "sessionId": "s", "blob": "x" * (2 * 1024 * 1024)})
    assert caught.value.status_code == 413


def test_unique_key_conflict_on_upsert_is_409(database) -> None:
    container = _container(database, unique="/seq")
    container.upsert_item({"id": "a", "sessionId": "s", "seq": 1})
    with pytest.raises(CosmosHttpResponseError) as caught:
        container.upsert_item({"id": "b", "sessionId": "s", "seq": 1})
    assert caught.value.status_code == 409


def test_connections_are_kept_alive(local: tuple[str, str]) -> None:
    url = urlparse(local[0])
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    connection = http.client.HTTPSConnection(url.hostname, url.port, context=context, timeout=10)
    try:
        for _ in range(2):  # the second request reuses the same socket
            connection.request("GET", "/_compat/info")
            connection.getresponse().read()
        connection.request("GET", "/")
        response = connection.getresponse()
        response.read()
        assert response.getheader("connection") == "keep-alive"
    finally:
        connection.close()


def test_the_server_exits_when_its_stdin_closes() -> None:
    server = start_local_cosmos()
    process = server._process
    process.stdin.close()
    assert process.wait(timeout=10) == 0
    server.stop()


def test_a_missing_install_is_reported_clearly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import cosmos_local

    monkeypatch.setattr(cosmos_local, "ROOT", tmp_path)
    with pytest.raises(cosmos_local.LocalCosmosError, match="npm ci"):
        cosmos_local.start_local_cosmos()
