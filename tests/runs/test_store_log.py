"""StoreConversationLog over the real SQLite store: reserved seqs, idempotent rewrites, run-scoped reads."""

from __future__ import annotations

from agent_runs.context import StepContext
from agent_runs.contracts import RunRef
from agent_runs.sequence import seq_for
from agent_runs.services import RunServices
from agent_runs.store_log import StoreConversationLog
from agent_runtime.messages import Message
from session_store import RunRecord, SqliteSessionStore


async def seeded_store() -> SqliteSessionStore:
    store = SqliteSessionStore(":memory:")
    await store.create_session("s1", "helper")
    for run_id in ("r1", "r2"):
        run = await store.begin_run(RunRecord(run_id=run_id, session_id="s1", agent="helper"))
        log = StoreConversationLog(store, "s1", run_id, first_seq=seq_for(run.ordinal, 0), slots=2)
        await log.append(Message.user(f"question of {run_id}", message_id=f"{run_id}:input:0"))
        await log.append(Message.assistant(f"answer of {run_id}", message_id=f"{run_id}:model:1:0"))
        await store.finish_run(run_id, "completed")
    return store


async def test_a_rewritten_message_keeps_its_seq_and_new_ones_take_the_reserved_slots() -> None:
    store = await seeded_store()
    log = StoreConversationLog(store, "s1", "r2", first_seq=seq_for(2, 5), slots=1)
    await log.append(Message.assistant("answer of r2, rewritten", message_id="r2:model:1:0"))
    await log.append(Message.assistant("a new one", message_id="r2:model:2:0"))
    page = await store.list_messages("s1")
    assert [(r.message_id, r.seq) for r in page.items][-2:] == [
        ("r2:model:1:0", seq_for(2, 1)),
        ("r2:model:2:0", seq_for(2, 5)),
    ]
    assert page.items[-2].payload["contents"][0]["text"] == "answer of r2, rewritten"
    await store.close()


async def test_run_log_reads_only_its_run_and_session_log_the_whole_conversation() -> None:
    store = await seeded_store()
    services = RunServices()
    services.__dict__["store"] = store  # the real store, handed to the services instead of opening one from settings
    ctx = StepContext(services, RunRef(run_id="r2", session_id="s1", agent="helper", ordinal=2))

    assert [m.text for m in await ctx.run_log().messages()] == ["question of r2", "answer of r2"]
    assert [m.text for m in await ctx.session_log().messages()] == [
        "question of r1",
        "answer of r1",
        "question of r2",
        "answer of r2",
    ]
    await store.close()
