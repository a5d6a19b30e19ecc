"""open_store picks the backend from the settings; a store serves callers on any thread and event loop."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from store_helpers import message, new_session

from session_store import SessionStore, SqliteSessionStore, StoreSettings, open_store


async def test_without_cosmos_endpoint_the_sqlite_store_opens_at_the_configured_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COSMOS_ENDPOINT", raising=False)
    monkeypatch.setenv("SESSION_STORE_PATH", str(tmp_path / "nested" / "sessions.sqlite3"))
    monkeypatch.setenv("SESSION_TTL_SECONDS", "")
    store = open_store()
    try:
        assert isinstance(store, SqliteSessionStore)
        await store.create_session("s-1", "assistant")
        assert (tmp_path / "nested" / "sessions.sqlite3").exists()
    finally:
        await store.close()
    reopened = open_store()
    try:
        assert (await reopened.get_session("s-1")).agent == "assistant", "the file store survives a restart"
    finally:
        await reopened.close()


async def test_memory_store_and_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COSMOS_ENDPOINT", raising=False)
    monkeypatch.setenv("SESSION_TTL_SECONDS", "3600")
    settings = StoreSettings(SESSION_STORE_PATH=":memory:")
    assert settings.session_ttl_seconds == 3600 and settings.cosmos_database == "agents"
    store = open_store(settings)
    try:
        assert isinstance(store, SessionStore)
        assert (await store.create_session("s", "a")).session_id == "s"
    finally:
        await store.close()


def test_settings_reject_a_non_positive_ttl() -> None:
    with pytest.raises(ValueError):
        StoreSettings(SESSION_TTL_SECONDS=0)


async def test_one_store_serves_several_threads_each_with_its_own_event_loop(harness) -> None:
    store = harness.open()
    session_id = await new_session(store)
    errors: list[BaseException] = []

    def worker(offset: int) -> None:
        async def write() -> None:
            await store.append_messages(session_id, [message(session_id, offset + i) for i in range(10)])

        try:
            asyncio.run(write())
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n * 10,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert await store.count_messages(session_id) == 40


def test_an_in_memory_store_is_refused_when_several_worker_processes_would_each_have_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("COSMOS_ENDPOINT", raising=False)
    monkeypatch.setenv("FUNCTIONS_WORKER_PROCESS_COUNT", "2")
    with pytest.raises(ValueError, match="cannot be shared by 2 worker processes"):
        StoreSettings(SESSION_STORE_PATH=":memory:")
    assert StoreSettings(SESSION_STORE_PATH="/tmp/sessions.sqlite3").worker_process_count == 2  # a file is shared
    monkeypatch.setenv("FUNCTIONS_WORKER_PROCESS_COUNT", "1")
    assert StoreSettings(SESSION_STORE_PATH=":memory:").session_store_path == ":memory:"
