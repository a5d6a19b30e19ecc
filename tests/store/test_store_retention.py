"""Contract: retention (TTL). Expired items are invisible to every read; without a TTL nothing expires."""

from __future__ import annotations

import pytest
from store_helpers import approval, message, new_session, run

from session_store import SessionStore


async def _populate(store: SessionStore) -> tuple[str, str]:
    session_id = await new_session(store)
    started = await store.begin_run(run(session_id))
    await store.append_messages(session_id, [message(session_id, i) for i in range(3)])
    await store.put_approvals([approval(session_id, started.run_id)])
    await store.record_effect(session_id, "effect-1", "email", {"to": "bob@example.com"})
    return session_id, started.run_id


async def _visible(store: SessionStore, session_id: str, run_id: str) -> dict[str, int]:
    return {
        "session": int(await store.get_session(session_id) is not None),
        "messages": await store.count_messages(session_id),
        "listed": len((await store.list_messages(session_id)).items),
        "run": int(await store.get_run(run_id) is not None),
        "runs": len(await store.list_runs(session_id)),
        "approval": int(await store.get_approval(f"{run_id}-call-1") is not None),
        "effects": len(await store.list_effects(session_id)),
    }


async def test_items_expire_after_the_ttl(harness) -> None:
    if harness.real_account:
        pytest.skip("a real account expires items on its own schedule; not waited for here")
    store = harness.open(ttl_seconds=60)
    session_id, run_id = await _populate(store)
    assert await _visible(store, session_id, run_id) == {
        "session": 1, "messages": 3, "listed": 3, "run": 1, "runs": 1, "approval": 1, "effects": 1,
    }
    await harness.expire(30)
    assert (await _visible(store, session_id, run_id))["messages"] == 3, "not expired before the TTL"
    await harness.expire(31)
    assert await _visible(store, session_id, run_id) == {
        "session": 0, "messages": 0, "listed": 0, "run": 0, "runs": 0, "approval": 0, "effects": 0,
    }
    # An expired session can be created again from scratch, and expired effects no longer block their key.
    recreated = await store.create_session(session_id, "assistant")
    assert recreated.run_count == 0
    _, created = await store.record_effect(session_id, "effect-1", "email", {})
    assert created


async def test_a_write_restarts_the_item_ttl(harness) -> None:
    if harness.real_account:
        pytest.skip("a real account expires items on its own schedule; not waited for here")
    store = harness.open(ttl_seconds=60)
    session_id = await new_session(store)
    await store.append_messages(session_id, [message(session_id, 0)])
    await harness.expire(50)
    await store.append_messages(session_id, [message(session_id, 0, "rewritten")])
    await harness.expire(50)
    assert [m.payload["content"] for m in (await store.list_messages(session_id)).items] == ["rewritten"]


async def test_without_a_ttl_nothing_expires(harness) -> None:
    store = harness.open()
    session_id, run_id = await _populate(store)
    await harness.expire(10 * 365 * 24 * 3600)
    assert (await _visible(store, session_id, run_id))["messages"] == 3
