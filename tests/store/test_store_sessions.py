"""Contract: sessions (create/get/list/delete), run against every backend."""

from __future__ import annotations

import pytest
from store_helpers import approval, message, new_id, new_session, run

from session_store import InvalidContinuationError, SessionStore


async def test_create_session_is_idempotent_and_keeps_the_first_record(store: SessionStore) -> None:
    session_id = new_id("s")
    first = await store.create_session(session_id, "assistant", {"title": "Ünïcode ✓"})
    again = await store.create_session(session_id, "other-agent", {"title": "changed"})
    assert again == first
    assert first.agent == "assistant" and first.metadata == {"title": "Ünïcode ✓"}
    assert first.run_count == 0 and first.active_run_id is None
    assert first.created_at is not None and first.etag


async def test_get_missing_session_is_none(store: SessionStore) -> None:
    assert await store.get_session(new_id("missing")) is None


async def test_list_sessions_pages_newest_first_filtered_by_agent(harness, store: SessionStore) -> None:
    agent = new_id("agent")
    created = []
    for _ in range(5):
        created.append(await new_session(store, agent))
        harness.clock.advance(1)
    await new_session(store, new_id("other-agent"))

    seen, token = [], None
    while True:
        page = await store.list_sessions(agent=agent, limit=2, continuation=token)
        assert len(page.items) <= 2
        seen += [s.session_id for s in page.items]
        token = page.continuation
        if token is None:
            break
    assert seen == list(reversed(created))


async def test_foreign_continuation_is_rejected(store: SessionStore) -> None:
    with pytest.raises(InvalidContinuationError):
        await store.list_sessions(agent="a", continuation="not-a-token")


async def test_delete_session_removes_everything_in_it(store: SessionStore) -> None:
    session_id = await new_session(store)
    keep_id = await new_session(store)
    started = await store.begin_run(run(session_id))
    await store.append_messages(session_id, [message(session_id, i, run_id=started.run_id) for i in range(5)])
    await store.put_approvals([approval(session_id, started.run_id)])
    await store.record_effect(session_id, "email-1", "email", {"to": "bob@example.com"})
    await store.append_messages(keep_id, [message(keep_id, 0)])

    assert await store.delete_session(session_id) is True

    assert await store.get_session(session_id) is None
    assert await store.count_messages(session_id) == 0
    assert await store.get_run(started.run_id) is None
    assert await store.list_runs(session_id) == []
    assert await store.get_approval(f"{started.run_id}-call-1") is None
    assert await store.list_effects(session_id) == []
    assert await store.delete_session(session_id) is False
    assert await store.count_messages(keep_id) == 1, "another session's data must survive"
