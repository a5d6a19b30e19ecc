"""Contract: owners and approvers - the per-owner session and run lists and an approver's inbox (every backend)."""

from __future__ import annotations

import pytest
from store_helpers import approval, new_id

from session_store import InvalidContinuationError, SessionStore
from session_store.records import RunRecord


async def _pages(fetch) -> list:
    seen, token = [], None
    while True:
        page = await fetch(token)
        assert len(page.items) <= 2
        seen += page.items
        token = page.continuation
        if token is None:
            return seen


async def test_sessions_keep_their_owner_and_list_per_owner(harness, store: SessionStore) -> None:
    alice, bob = new_id("alice"), new_id("bob")
    mine = []
    for _ in range(3):
        session_id = new_id("s")
        created = await store.create_session(session_id, "assistant", owner_id=alice, owner_name="Alice")
        assert created.owner_id == alice and created.owner_name == "Alice"
        mine.append(session_id)
        await store.create_session(new_id("s"), "assistant", owner_id=bob)
        harness.clock.advance(1)
    # Creating again (a retry, or another caller guessing the id) never changes the owner.
    again = await store.create_session(mine[0], "assistant", owner_id=bob)
    assert again.owner_id == alice

    listed = await _pages(lambda token: store.list_sessions(owner_id=alice, limit=2, continuation=token))
    assert [s.session_id for s in listed] == list(reversed(mine))
    with pytest.raises(InvalidContinuationError):  # a token of one owner's list is no good for another's
        first = await store.list_sessions(owner_id=alice, limit=1)
        await store.list_sessions(owner_id=bob, limit=1, continuation=first.continuation)


async def test_runs_list_per_owner_newest_first_by_status_and_agent(harness, store: SessionStore) -> None:
    alice, bob = new_id("alice"), new_id("bob")
    expected = []
    for index in range(5):
        session_id = new_id("s")
        owner = alice if index != 2 else bob
        await store.create_session(session_id, "assistant", owner_id=owner)
        agent = "assistant" if index % 2 == 0 else "helper"
        record = RunRecord(run_id=new_id("run"), session_id=session_id, agent=agent, owner_id=owner)
        started = await store.begin_run(record)
        assert started.owner_id == owner
        if index == 4:
            await store.finish_run(started.run_id, "completed")
        if owner == alice:
            expected.append((started.run_id, agent, "completed" if index == 4 else "in_progress"))
        harness.clock.advance(1)

    every = await _pages(lambda token: store.list_owner_runs(alice, limit=2, continuation=token))
    assert [r.run_id for r in every] == [run_id for run_id, _, _ in reversed(expected)]
    helpers = await _pages(lambda token: store.list_owner_runs(alice, agent="helper", limit=2, continuation=token))
    assert [r.run_id for r in helpers] == [run_id for run_id, agent, _ in reversed(expected) if agent == "helper"]
    done = await store.list_owner_runs(alice, status="completed")
    assert [r.run_id for r in done.items] == [expected[-1][0]]
    assert (await store.list_owner_runs(new_id("nobody"))).items == []


async def test_branch_runs_of_a_response_list_per_owner_newest_first(harness, store: SessionStore) -> None:
    alice, bob = new_id("alice"), new_id("bob")
    response, other = new_id("resp"), new_id("resp")
    branches = []
    for owner, branched_from in ((alice, response), (bob, response), (alice, other), (alice, response), (alice, None)):
        run_id = new_id("run")  # a branch's session is named after its run
        await store.create_session(run_id, "assistant", owner_id=owner)
        record = RunRecord(run_id=run_id, session_id=run_id, agent="assistant", owner_id=owner,
                           branched_from=branched_from)
        await store.begin_run(record)
        if owner == alice and branched_from == response:
            branches.append(run_id)
        harness.clock.advance(1)

    found = await store.list_branch_runs(response, owner_id=alice)
    assert [r.run_id for r in found] == list(reversed(branches))
    assert [r.run_id for r in await store.list_branch_runs(response, owner_id=alice, limit=1)] == [branches[-1]]
    assert await store.list_branch_runs(new_id("resp"), owner_id=alice) == []


async def test_inbox_lists_pending_approvals_by_decider_keys_newest_first(harness, store: SessionStore) -> None:
    role = f"role:{new_id('Payments.Approver')}"
    carol = f"principal:{new_id('carol')}"
    ids = []
    for index in range(4):
        session_id, run_id = new_id("s"), new_id("run")
        await store.create_session(session_id, "assistant")
        keys = [role] if index % 2 == 0 else [carol]
        record = approval(session_id, run_id).model_copy(update={"decider_keys": keys, "approvers": ["x"]})
        await store.put_approvals([record])
        ids.append((record.approval_id, keys[0]))
        harness.clock.advance(1)
    await store.decide_approval(ids[0][0], "approved", decided_by="someone", decided_by_name="Some One")

    by_role = await _pages(lambda token: store.list_decidable_approvals([role], limit=2, continuation=token))
    assert [a.approval_id for a in by_role] == [ids[2][0]]  # the decided one left the pending inbox
    both = await _pages(lambda token: store.list_decidable_approvals([carol, role], limit=2, continuation=token))
    assert [a.approval_id for a in both] == [ids[3][0], ids[2][0], ids[1][0]]
    decided = await store.list_decidable_approvals([role], status="approved")
    assert [a.approval_id for a in decided.items] == [ids[0][0]]
    assert decided.items[0].decided_by == "someone" and decided.items[0].decided_by_name == "Some One"
    assert (await store.list_decidable_approvals([])).items == []
