"""A workflow's journal read back for its references (`WorkflowContext.data`), on both stores: entries close
together come from one query of their range, entries far apart from one query each, and both give exactly the
entries asked for (another message of the control session in the range, e.g. a notification, is left out)."""

from __future__ import annotations

import uuid

from agent_runs.sequence import seq_for
from agent_runs.services import RunServices
from session_store import MessageRecord, SessionStore
from workflow_runtime.contracts import JOURNAL_ROLE, WorkflowRef
from workflow_runtime.journal import WorkflowContext

ORDINAL = 1


async def journal_with(store: SessionStore, positions: list[int], other: int) -> WorkflowContext:
    ref = WorkflowRef(run_id=uuid.uuid4().hex, workflow="w")
    session = ref.control_session
    await store.create_session(session, "workflow:w")
    records = [
        MessageRecord(session_id=session, message_id=f"{ref.run_id}:step:s{p}", seq=seq_for(ORDINAL, p),
                      run_id=ref.run_id, role=JOURNAL_ROLE, payload={"step": f"s{p}", "output": p})
        for p in positions
    ]
    records.append(MessageRecord(session_id=session, message_id=f"{ref.run_id}:other", seq=seq_for(ORDINAL, other),
                                 run_id=ref.run_id, role="system", payload={"note": "not a reference"}))
    await store.append_messages(session, records)
    services = RunServices()
    services.__dict__["store"] = store
    return WorkflowContext(services, ref)


async def test_references_close_together_and_far_apart_read_exactly_their_entries(store: SessionStore) -> None:
    ctx = await journal_with(store, [0, 1, 3, 40], other=2)
    near = await ctx.entries([seq_for(ORDINAL, 0), seq_for(ORDINAL, 1), seq_for(ORDINAL, 3)])  # one range query
    assert {seq: e["output"] for seq, e in near.items()} == {seq_for(ORDINAL, p): p for p in (0, 1, 3)}
    far = await ctx.entries([seq_for(ORDINAL, 0), seq_for(ORDINAL, 40)])  # one query each
    assert {seq: e["output"] for seq, e in far.items()} == {seq_for(ORDINAL, 0): 0, seq_for(ORDINAL, 40): 40}
    missing = await ctx.entries([seq_for(ORDINAL, 1), seq_for(ORDINAL, 4), seq_for(ORDINAL, 5)])  # 2 in range
    assert {seq: e["output"] for seq, e in missing.items()} == {seq_for(ORDINAL, 1): 1}
    assert await ctx.entries([]) == {}
