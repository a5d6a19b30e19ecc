"""Contract: workflow signals, a queue per (session, name) with indexes allocated atomically, every backend."""

from __future__ import annotations

import asyncio

from store_helpers import new_id, new_session

from session_store import SessionStore


async def test_signals_of_a_name_are_numbered_from_one_in_order(store: SessionStore) -> None:
    session_id = await new_session(store)
    first = await store.append_signal(session_id, "go", new_id("sig"), {"n": 1})
    other = await store.append_signal(session_id, "stop", new_id("sig"), None)
    second = await store.append_signal(session_id, "go", new_id("sig"), {"n": 2})
    assert (first.index, second.index, other.index) == (1, 2, 1)
    assert first.created_at is not None
    listed = await store.list_signals(session_id, "go")
    assert [(s.index, s.payload, s.signal_id) for s in listed] == [
        (1, {"n": 1}, first.signal_id),
        (2, {"n": 2}, second.signal_id),
    ]
    assert [s.index for s in await store.list_signals(session_id, "go", from_index=2)] == [2]
    assert await store.list_signals(session_id, "go", from_index=3) == []
    assert [s.index for s in await store.list_signals(session_id, "go", limit=1)] == [1]
    assert await store.list_signals(await new_session(store), "go") == []


async def test_concurrent_appends_get_distinct_gapless_indexes(store: SessionStore) -> None:
    session_id = await new_session(store)
    ids = [new_id("sig") for _ in range(20)]
    appended = await asyncio.gather(*(store.append_signal(session_id, "x", i, {"id": i}) for i in ids))
    assert sorted(s.index for s in appended) == list(range(1, 21))
    listed = await store.list_signals(session_id, "x")
    assert [s.index for s in listed] == list(range(1, 21))
    by_index = {s.index: s.signal_id for s in appended}
    assert [s.signal_id for s in listed] == [by_index[i] for i in range(1, 21)]  # each stored once, as appended
    assert {s.signal_id for s in listed} == set(ids)


async def test_signals_are_not_effects_and_go_with_their_session(store: SessionStore) -> None:
    session_id = await new_session(store)
    await store.append_signal(session_id, "go", new_id("sig"), {"n": 1})
    await store.record_effect(session_id, "email-1", "tool", {"to": "bob"})
    assert [e.key for e in await store.list_effects(session_id)] == ["email-1"]
    assert await store.delete_session(session_id)
    assert await store.list_signals(session_id, "go") == []
