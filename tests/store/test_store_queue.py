"""Contract: queued runs - a busy session queues runs when asked (back, or front for an interrupt), hands itself to
the first queued run when the active one finishes, and a queued run gets its ordinal when it takes its turn."""

from __future__ import annotations

import pytest
from store_helpers import new_id, new_session, run

from session_store import SessionBusyError, SessionStore


async def test_runs_queue_in_order_and_take_their_turns(store: SessionStore) -> None:
    session_id = await new_session(store)
    first = await store.begin_run(run(session_id, new_id("a")))
    assert first.ordinal == 1
    with pytest.raises(SessionBusyError):
        await store.begin_run(run(session_id, new_id("x")))
    second = await store.begin_run(run(session_id, new_id("b")), queue="back")
    third = await store.begin_run(run(session_id, new_id("c")), queue="back")
    assert (second.status, second.ordinal, third.ordinal) == ("queued", 0, 0)
    assert await store.begin_run(run(session_id, second.run_id), queue="back") == second  # a retry changes nothing
    session = await store.get_session(session_id)
    assert (session.active_run_id, session.queued_run_ids) == (first.run_id, [second.run_id, third.run_id])

    assert await store.take_turn(second.run_id) is None  # not yet: the first run holds the session
    await store.finish_run(first.run_id, "completed")
    session = await store.get_session(session_id)
    assert (session.active_run_id, session.queued_run_ids) == (second.run_id, [third.run_id])
    assert await store.take_turn(third.run_id) is None
    turn = await store.take_turn(second.run_id)
    assert turn is not None and (turn.ordinal, turn.status) == (2, "in_progress")
    assert (await store.take_turn(second.run_id)).ordinal == 2  # idempotent
    assert (await store.get_session(session_id)).run_count == 2

    # An interrupt goes to the front; a queued run that ends (cancelled) just leaves the queue.
    urgent = await store.begin_run(run(session_id, new_id("u")), queue="front")
    assert (await store.get_session(session_id)).queued_run_ids == [urgent.run_id, third.run_id]
    await store.finish_run(third.run_id, "cancelled")
    assert (await store.get_session(session_id)).queued_run_ids == [urgent.run_id]
    await store.finish_run(second.run_id, "cancelled")
    assert (await store.take_turn(urgent.run_id)).ordinal == 3
    await store.finish_run(urgent.run_id, "completed")
    session = await store.get_session(session_id)
    assert (session.active_run_id, session.queued_run_ids, session.run_count) == (None, [], 3)
    # A free session starts a run at once, even when it was asked to queue.
    free = await store.begin_run(run(session_id, new_id("f")), queue="back")
    assert free.ordinal == 4
