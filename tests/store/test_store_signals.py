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


async def test_a_signal_is_appended_once_per_signal_id(store: SessionStore) -> None:
    """An append repeated after a lost answer (same signal id) returns the signal as first appended, adding nothing:
    a workflow consumes its queue signal by signal, so a copy would be acted on twice."""
    session_id = await new_session(store)
    first = await store.append_signal(session_id, "go", "sig-1", {"n": 1})
    other = await store.append_signal(session_id, "go", "sig-2", {"n": 2})
    again = await store.append_signal(session_id, "go", "sig-1", {"n": 1})
    assert (again.index, again.signal_id, again.payload) == (1, "sig-1", {"n": 1})
    assert again.created_at == first.created_at
    assert [(s.index, s.signal_id) for s in await store.list_signals(session_id, "go")] == [
        (1, "sig-1"), (2, other.signal_id),
    ]
    assert (await store.append_signal(session_id, "stop", "sig-1", None)).index == 1  # another queue: its own


async def test_concurrent_appends_of_one_signal_id_store_it_once(store: SessionStore) -> None:
    session_id = await new_session(store)
    others = [new_id("sig") for _ in range(10)]
    appended = await asyncio.gather(
        *(store.append_signal(session_id, "x", i, {"id": i}) for i in others),
        *(store.append_signal(session_id, "x", "same", {"id": "same"}) for _ in range(10)),
    )
    assert len({s.index for s in appended if s.signal_id == "same"}) == 1
    listed = await store.list_signals(session_id, "x")
    assert [s.index for s in listed] == list(range(1, 12))
    assert sorted(s.signal_id for s in listed) == sorted([*others, "same"])
