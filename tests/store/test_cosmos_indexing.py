"""Cosmos indexes only the paths the store's queries filter or sort on (`cosmos_admin.CONTAINERS`, the same in
`infra/app.bicep`): payloads are left out of the index, so a write is charged for a few index terms, not one per
property of a message or a tool's arguments.

A query on a path left out would still run on Azure, as a scan (and an ORDER BY on it would fail), while the local
emulator ignores indexing policies altogether: so this runs every query call site of the Cosmos store against the
emulator, records the SQL each sends, and checks the paths it names against its container's policy."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from store_helpers import approval, message, new_session, run

from session_store import ConflictError, StoreSettings, open_store
from session_store.cosmos_admin import CONTAINERS
from session_store.cosmos_io import CosmosContainers
from session_store.cosmos_store import CosmosSessionStore

STORE_SOURCE = Path(inspect.getfile(CosmosSessionStore))
INFRA = Path(__file__).resolve().parents[2] / "infra" / "app.bicep"
SPECS = {spec.name: spec for spec in CONTAINERS}
_PATH = re.compile(r"\bc(?:\.(\w+)|\['(\w+)'\])")
_ARRAY = re.compile(r"ARRAY_CONTAINS\(c\.(\w+),")


def paths_named(sql: str) -> set[str]:
    """The index paths a query needs: each property it filters or sorts on (the id is always indexed)."""
    arrays = set(_ARRAY.findall(sql))
    clauses = sql.split(" FROM c", 1)[1]  # what is selected needs no index
    named = {a or b for a, b in _PATH.findall(clauses)} - {"id"}
    return {f"/{name}/[]/?" if name in arrays else f"/{name}/?" for name in named}


def query_call_sites() -> set[int]:
    """The lines of the store's source that send a query (`self._db.query(...)` / `.query_page(...)`)."""
    tree = ast.parse(STORE_SOURCE.read_text())
    return {node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("query", "query_page")}


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, int]]:
    """(container, SQL, the store's line that sent it) for every query sent while the test runs."""
    sent: list[tuple[str, str, int]] = []

    def site() -> int:
        frame = inspect.currentframe()
        while frame is not None and Path(frame.f_code.co_filename) != STORE_SOURCE:
            frame = frame.f_back
        return frame.f_lineno if frame is not None else -1

    for method in ("query", "query_page"):
        original = getattr(CosmosContainers, method)

        async def recording(self: CosmosContainers, name: str, sql: str, *args: Any, _original: Any = original,
                            **kwargs: Any) -> Any:
            sent.append((name, sql, site()))
            return await _original(self, name, sql, *args, **kwargs)

        monkeypatch.setattr(CosmosContainers, method, recording)
    return sent


@pytest.mark.cosmos
async def test_every_query_filters_and_sorts_only_on_indexed_paths(
    cosmos_account: tuple[str, str | None, bool], cosmos_database: str, recorded: list[tuple[str, str, int]]
) -> None:
    endpoint, key, _ = cosmos_account
    store = open_store(StoreSettings(COSMOS_ENDPOINT=endpoint, COSMOS_KEY=key, COSMOS_DATABASE=cosmos_database,
                                     COSMOS_CONTAINER_PREFIX="idx-"))
    try:
        session_id = await new_session(store)
        started = await store.begin_run(run(session_id).model_copy(update={"owner_id": "alice"}))
        await store.append_messages(session_id, [message(session_id, 0, run_id=started.run_id)])
        with pytest.raises(ConflictError, match="already belongs to message"):  # the store asks which one owns it
            await store.append_messages(session_id, [message(session_id, 0).model_copy(update={"message_id": "x"})])
        await store.list_messages(session_id, after_seq=-1, up_to_seq=5, run_id=started.run_id)
        await store.count_messages(session_id, run_id=started.run_id)
        await store.last_seq(session_id)
        await store.list_sessions(agent="assistant", owner_id="alice")
        await store.list_runs(session_id)
        # Closing a dead start asks whether one position was written (run on the store's loop, as its callers are).
        assert await store._portal.call(store._has_run_at(session_id, started.ordinal))
        await store.list_owner_runs("alice", status="in_progress", agent="assistant")
        await store.list_branch_runs("resp_x", owner_id="alice")
        pending = approval(session_id, started.run_id).model_copy(update={"decider_keys": ["user:alice"]})
        await store.put_approvals([pending])
        await store.list_approvals(run_id=started.run_id, session_id=session_id, status="pending")
        await store.list_decidable_approvals(["user:alice", "role:ops"])
        await store.record_effect(session_id, "key-1", "email", {"to": "bob"})
        await store.list_effects(session_id, kind="email")
        await store.append_signal(session_id, "go", "signal-1", {"n": 1})
        await store.list_signals(session_id, "go")
        await store.delete_session(session_id)
    finally:
        await store.close()

    assert {line for _, _, line in recorded} == query_call_sites(), "a query call site of the store was not run"
    for container, sql, line in recorded:
        missing = paths_named(sql) - set(SPECS[container].indexed_paths)
        assert not missing, f"{STORE_SOURCE.name}:{line} queries {container!r} on paths it does not index: {missing}"


def test_the_bicep_containers_are_the_stores() -> None:
    """The app's identity cannot create containers on Azure: the Bicep makes them, with the same policy."""
    text = INFRA.read_text()
    entry = r"^\s*\{ name: '(\w+)', partitionKey: '([^']+)', uniqueKeys: \[(.*?)\], indexed: \[(.*?)\] \}$"
    entries = re.findall(entry, text, re.M)
    assert {name for name, *_ in entries} == set(SPECS)
    for name, partition_key, unique_keys, indexed in entries:
        spec = SPECS[name]
        assert partition_key == spec.partition_key
        assert tuple(re.findall(r"'(/[^']*)'", unique_keys)) == spec.unique_keys
        assert tuple(re.findall(r"path: '([^']+)'", indexed)) == spec.indexed_paths, name
    assert re.search(r"includedPaths: container\.indexed\s+excludedPaths: \[ \{ path: '/\*' \} \]", text)


def test_payloads_are_not_indexed() -> None:
    for spec in CONTAINERS:
        policy = spec.indexing_policy()
        assert policy["excludedPaths"] == [{"path": "/*"}]
        assert not any(p["path"].startswith(("/payload", "/arguments", "/output", "/input"))
                       for p in policy["includedPaths"])
