"""Contract: approvals (decided exactly once) and the tool-effect ledger, every backend."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from store_helpers import approval, new_id, new_session, run

from session_store import AlreadyDecidedError, NotFoundError, SessionStore


async def _run_with_approvals(store: SessionStore, calls: int = 2):
    session_id = await new_session(store)
    started = await store.begin_run(run(session_id))
    stored = await store.put_approvals([approval(session_id, started.run_id, f"call-{i}") for i in range(calls)])
    return session_id, started, stored


async def test_put_and_get_approvals(store: SessionStore) -> None:
    session_id, started, stored = await _run_with_approvals(store)
    assert [a.status for a in stored] == ["pending", "pending"]
    fetched = await store.get_approval(stored[0].approval_id)
    assert fetched == stored[0] and fetched.arguments["to"] == "bob@example.com"
    assert await store.get_approval(new_id("approval")) is None
    by_run = await store.list_approvals(run_id=started.run_id)
    assert [a.call_id for a in by_run] == ["call-0", "call-1"]
    assert len(await store.list_approvals(session_id=session_id, status="pending")) == 2
    with pytest.raises(ValueError):
        await store.list_approvals()


async def test_a_retried_put_never_resets_a_decision(store: SessionStore) -> None:
    session_id, started, stored = await _run_with_approvals(store, calls=1)
    await store.decide_approval(stored[0].approval_id, "approved", decided_by="alice")
    again = await store.put_approvals([approval(session_id, started.run_id, "call-0")])
    assert again[0].status == "approved" and again[0].decided_by == "alice"


async def test_decision_is_recorded_with_who_when_and_what(store: SessionStore) -> None:
    _, started, stored = await _run_with_approvals(store)
    when = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    decided = await store.decide_approval(
        stored[0].approval_id, "approved", decided_by="alice@example.com", reason="looks fine",
        edited_arguments={"to": "carol@example.com"}, decided_at=when,
    )
    assert (decided.status, decided.decided_by, decided.reason, decided.decided_at) == (
        "approved", "alice@example.com", "looks fine", when,
    )
    assert decided.edited_arguments == {"to": "carol@example.com"}
    assert await store.get_approval(stored[0].approval_id) == decided
    rejected = await store.decide_approval(stored[1].approval_id, "rejected", reason="no")
    assert rejected.status == "rejected"
    assert [a.call_id for a in await store.list_approvals(run_id=started.run_id, status="pending")] == []


async def test_escalation_hands_a_pending_approval_on_with_a_new_deadline(store: SessionStore) -> None:
    _, _, (first, second) = await _run_with_approvals(store)
    deadline, when = datetime(2026, 5, 2, 12, 0, tzinfo=UTC), datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    escalated = await store.escalate_approval(first.approval_id, "role:Supervisors", expires_at=deadline,
                                              escalated_at=when, to_keys=["role:Supervisors"])
    assert (escalated.status, escalated.escalated_to, escalated.escalated_at, escalated.expires_at) == (
        "pending", "role:Supervisors", when, deadline,
    )
    # The escalation's approver joins the approvers (and the inbox keys): it may decide what it was handed.
    assert escalated.approvers == [*first.approvers, "role:Supervisors"]
    assert escalated.decider_keys == [*first.decider_keys, "role:Supervisors"]
    assert [a.approval_id for a in (await store.list_decidable_approvals(["role:Supervisors"])).items] == [
        first.approval_id
    ]
    assert await store.get_approval(first.approval_id) == escalated
    # A retried escalation step changes nothing (not even the deadline it would compute anew).
    again = await store.escalate_approval(first.approval_id, "role:Supervisors", expires_at=datetime.now(UTC))
    assert again.expires_at == deadline
    # Still decidable; a decided approval is never escalated.
    decided = await store.decide_approval(first.approval_id, "approved", decided_by="sam")
    assert (decided.status, decided.escalated_to) == ("approved", "role:Supervisors")
    await store.decide_approval(second.approval_id, "rejected")
    with pytest.raises(AlreadyDecidedError) as lost:
        await store.escalate_approval(second.approval_id, "role:Supervisors", expires_at=deadline)
    assert lost.value.current.status == "rejected"
    with pytest.raises(NotFoundError):
        await store.escalate_approval(new_id("approval"), "x", expires_at=deadline)


async def test_exactly_one_of_twenty_concurrent_decisions_wins(store: SessionStore) -> None:
    _, _, stored = await _run_with_approvals(store, calls=1)
    approval_id = stored[0].approval_id
    decisions = [("approved" if i % 2 else "rejected", f"user-{i}") for i in range(20)]
    results = await asyncio.gather(
        *(store.decide_approval(approval_id, status, decided_by=who) for status, who in decisions),
        return_exceptions=True,
    )
    winners = [r for r in results if not isinstance(r, BaseException)]
    assert len(winners) == 1, results
    losers = [r for r in results if isinstance(r, BaseException)]
    assert all(isinstance(e, AlreadyDecidedError) for e in losers)
    assert all(e.current.decided_by == winners[0].decided_by for e in losers)
    assert await store.get_approval(approval_id) == winners[0]


async def test_deciding_an_unknown_approval_is_not_found(store: SessionStore) -> None:
    with pytest.raises(NotFoundError):
        await store.decide_approval(new_id("approval"), "approved")


async def test_an_effect_is_recorded_once_per_key_even_under_concurrency(store: SessionStore) -> None:
    session_id = await new_session(store)
    email = {"to": "bob@example.com", "subject": "hi", "body": "héllo 👋"}
    attempts = [store.record_effect(session_id, "run-1:call-1", "email", email) for _ in range(10)]
    results = await asyncio.gather(*attempts)
    assert sum(created for _, created in results) == 1
    assert {record.payload["body"] for record, _ in results} == {"héllo 👋"}
    await store.record_effect(session_id, "run-1:call-2", "webhook", {"url": "https://example.com"})
    assert [e.key for e in await store.list_effects(session_id, kind="email")] == ["run-1:call-1"]
    assert len(await store.list_effects(session_id)) == 2


async def test_an_effect_is_read_by_its_key(store: SessionStore) -> None:
    """A point read of one entry: its own, in its own session only; None for a key never recorded."""
    session_id, other = await new_session(store), await new_session(store)
    recorded, _ = await store.record_effect(session_id, "run-1:call-1", "email", {"to": "bob@example.com"})
    await store.record_effect(session_id, "run-1:call-2", "email", {"to": "eve@example.com"})
    assert await store.get_effect(session_id, "run-1:call-1") == recorded
    assert await store.get_effect(session_id, "run-1:call-3") is None
    assert await store.get_effect(other, "run-1:call-1") is None


async def test_oversized_writes_of_every_kind_are_rejected_before_anything_changes(store: SessionStore) -> None:
    from session_store import MAX_RECORD_BYTES, ItemTooLargeError

    huge = {"blob": "x" * MAX_RECORD_BYTES}
    session_id, started, stored = await _run_with_approvals(store, calls=1)
    with pytest.raises(ItemTooLargeError):
        await store.record_effect(session_id, "big", "email", huge)
    with pytest.raises(ItemTooLargeError):
        await store.finish_run(started.run_id, "completed", output=huge)
    with pytest.raises(ItemTooLargeError):
        await store.decide_approval(stored[0].approval_id, "approved", edited_arguments=huge)
    assert await store.list_effects(session_id) == []
    assert (await store.get_run(started.run_id)).status == "in_progress"
    assert (await store.get_session(session_id)).active_run_id == started.run_id
    assert (await store.get_approval(stored[0].approval_id)).status == "pending"
