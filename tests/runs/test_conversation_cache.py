"""The conversation cache: what it serves (only settled ranges, only at the run's current ETag) and what it drops.

Pure tests of `ConversationCache` first, then the logs of a run's steps over a real store (every backend of the
store contract suite): the second model call of a run in this process reads nothing of the conversation, and any
change of the run's record (a rewind reopens it) makes the next step read the session again.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_runs.conversation_cache import MAX_JSON_CHARS, ConversationCache
from agent_runs.store_log import CacheUse, StoreConversationLog, to_record
from agent_runtime.agents import AgentDefinition
from agent_runtime.loop_types import CallModel, ToolInvocation
from agent_runtime.messages import ChatResponse, Message, TextContent
from agent_runtime.middleware import CallNext, ChatContext
from agent_runtime.models.types import ChatRequest
from agent_runtime.steps import call_model_step, invoke_tool_step
from agent_runtime.tools import tool
from session_store import MessageRecord, RunRecord, SessionRecord, SqliteSessionStore


def record(seq: int, text: str = "", message_id: str | None = None) -> MessageRecord:
    message = Message(role="user", contents=text or f"m{seq}", message_id=message_id or f"m{seq}")
    return to_record("s", "r", seq, message)


def test_serves_only_a_settled_range_at_the_same_etag() -> None:
    cache = ConversationCache()
    cache.start("s", "r", "e1", [record(0), record(1), record(5)], below=5)  # seq 5: the reader's own block
    assert [r.seq for r in cache.records("s", "r", "e1", after=-1, below=5) or []] == [0, 1]
    assert cache.records("s", "r", "e1", after=-1, below=6) is None  # 5 is not settled
    cache.settle_block("s", "r", "e1", [record(5, "answer"), record(7)], low=5, high=7)  # 7 is outside its block
    assert [r.seq for r in cache.records("s", "r", "e1", after=-1, below=7) or []] == [0, 1, 5]
    assert [r.seq for r in cache.records("s", "r", "e1", after=0, below=None) or []] == [1, 5]  # up to 7
    assert cache.records("s", "r", "e1", after=8, below=None) is None
    assert cache.records("s", "other-run", "e1", after=-1, below=5) is None


def test_another_etag_drops_the_entry_and_a_settle_at_an_old_etag_is_ignored() -> None:
    cache = ConversationCache()
    cache.start("s", "r", "e1", [record(0)], below=1)
    cache.settle_block("s", "r", "e0", [record(1)], low=1, high=2)  # checked against an older record: ignored
    assert cache.records("s", "r", "e1", after=-1, below=2) is None
    assert cache.records("s", "r", "e2", after=-1, below=1) is None  # the run changed (e.g. reopened)
    assert not cache.has("s", "r")
    assert cache.records("s", "r", "e1", after=-1, below=1) is None  # dropped for good
    cache.start("s", "r", None, [record(0)], below=1)  # no ETag known: nothing to bind an entry to
    assert not cache.has("s", "r")


def test_a_change_this_process_made_keeps_the_entry_and_forget_drops_it() -> None:
    cache = ConversationCache()
    cache.start("s", "r", "e1", [record(0)], below=1)
    cache.run_changed("s", "r", "e0", "e9")  # conditioned on another version: says nothing about this entry
    assert cache.records("s", "r", "e9", after=-1, below=1) is None
    cache.start("s", "r", "e1", [record(0)], below=1)
    cache.run_changed("s", "r", "e1", "e2")
    assert [r.seq for r in cache.records("s", "r", "e2", after=-1, below=1) or []] == [0]
    cache.forget("s", "r")
    assert not cache.has("s", "r")


def test_least_recently_used_runs_go_first() -> None:
    cache = ConversationCache(max_runs=2)
    for run in ("a", "b", "c"):
        cache.start("s", run, "e", [], below=1)
    assert [cache.has("s", run) for run in ("a", "b", "c")] == [False, True, True]


def test_the_messages_held_are_bounded() -> None:
    cache = ConversationCache(max_records=3)
    cache.start("s", "a", "e", [record(0), record(1)], below=2)
    cache.start("s", "b", "e", [record(0)], below=1)
    cache.settle_block("s", "b", "e", [record(1)], low=1, high=2)  # 4 messages: the oldest run goes
    assert [cache.has("s", run) for run in ("a", "b")] == [False, True]
    cache.start("s", "c", "e", [record(i) for i in range(4)], below=4)  # too long to keep at all
    assert not cache.has("s", "c")
    cache.start("s", "b", "e", [record(0), record(1)], below=2)  # started afresh: its old messages are let go
    cache.start("s", "d", "e", [record(0)], below=1)
    assert [cache.has("s", run) for run in ("b", "d")] == [True, True]


def test_large_messages_are_bounded_by_their_size_too() -> None:
    """Tool results can be large (up to the store's 2 MB item): a host that keeps many runs must not hold them all
    because their count is small. 20 runs of 40 results of 50 KB (40 MB of JSON): the oldest runs go."""
    cache = ConversationCache()
    big = "x" * 50_000
    for run in range(20):
        cache.start("s", f"r{run}", "e", [record(i, big, f"r{run}:{i}") for i in range(40)], below=40)
    held = [cache.has("s", f"r{run}") for run in range(20)]
    assert held[-1] and not held[0]
    assert held.count(True) * 40 * 50_000 <= MAX_JSON_CHARS

    small = ConversationCache(max_json_chars=3 * 50_100)
    small.start("s", "a", "e", [record(0, big, "a:0")], below=1)
    for _ in range(5):  # the same message settled again (a retried step): counted once
        small.settle_block("s", "a", "e", [record(1, big, "a:1")], low=1, high=2)
    assert small.has("s", "a")


# ------------------------------------------------------------------------------------------------ over a store


class CountingStore(SqliteSessionStore):
    """The real SQLite store, counting the conversation reads (what the cache saves)."""

    reads = 0
    probes = 0

    async def list_messages(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.reads += 1
        return await super().list_messages(*args, **kwargs)

    async def get_message(self, session_id: str, message_id: str) -> MessageRecord | None:
        self.probes += 1
        return await super().get_message(session_id, message_id)


@pytest.fixture
async def store(tmp_path):  # type: ignore[no-untyped-def]
    opened = CountingStore(str(tmp_path / "store.sqlite3"))
    yield opened
    await opened.close()


def said(text: str, message_id: str, *calls: str) -> Message:
    contents = [{"type": "text", "text": text}, *({"type": "function_call", "call_id": c, "name": "t",
                                                  "arguments": {}} for c in calls)]
    return Message.model_validate({"role": "assistant", "contents": contents, "message_id": message_id})


async def started_run(store: CountingStore, cache: ConversationCache) -> RunRecord:
    run = await store.begin_run(
        RunRecord(run_id="r", session_id="s", agent="a", status="in_progress"),
        new_session=SessionRecord(session_id="s", agent="a"),
    )
    await store.append_messages("s", [record(run.ordinal * 10**9, "hi", "r:input:0")])
    return run


async def test_a_model_call_after_a_settled_one_reads_nothing(store: CountingStore) -> None:
    cache = ConversationCache()
    run = await started_run(store, cache)
    first = run.ordinal * 10**9
    log = StoreConversationLog(store, "s", "r", first_seq=first + 1, slots=16)
    log.use_cache(CacheUse(cache, run_etag=run.etag, whole=True))
    assert [m.text for m in await log.messages()] == ["hi"] and store.reads == 1
    await log.append(said("calling", "r:model:1:0", "c1"))
    await log.settle(probe_id="r:model:1:1")
    tool = StoreConversationLog(store, "s", "r", first_seq=first + 17, slots=1, after_seq=first - 1)
    tool.use_cache(CacheUse(cache, needs_calls=("c1",), probe_ids=("r:result:c1",)))
    assert [m.message_id for m in await tool.messages()] == ["r:input:0", "r:model:1:0"] and store.reads == 1
    await tool.append(Message.model_validate({"role": "tool", "message_id": "r:result:c1", "contents": [
        {"type": "function_result", "call_id": "c1", "result": "ok"}]}))
    await tool.settle()

    second = StoreConversationLog(store, "s", "r", first_seq=first + 18, slots=16)
    second.use_cache(CacheUse(cache, run_etag=run.etag, whole=True))
    assert [m.message_id for m in await second.messages()] == ["r:input:0", "r:model:1:0", "r:result:c1"]
    assert store.reads == 1  # served from what the steps wrote

    # The run's record changes (here: a rewind-like update): the next model call reads the session again.
    changed = await store.update_run("r", metadata={"x": 1})
    again = StoreConversationLog(store, "s", "r", first_seq=first + 18, slots=16)
    again.use_cache(CacheUse(cache, run_etag=changed.etag, whole=True))
    assert len(await again.messages()) == 3 and store.reads == 2


async def test_an_earlier_attempt_that_wrote_more_keeps_the_block_unsettled(store: CountingStore) -> None:
    cache = ConversationCache()
    run = await started_run(store, cache)
    first = run.ordinal * 10**9
    cache.start("s", "r", run.etag, await store_records(store), below=first + 1)
    # A first attempt stored two messages, then died; the retry (this log) answers with one.
    await store.append_messages("s", [record(first + 2, "left over", "r:model:1:1")])
    log = StoreConversationLog(store, "s", "r", first_seq=first + 1, slots=16)
    log.use_cache(CacheUse(cache, run_etag=run.etag, whole=True))
    await log.messages()
    await log.append(said("answer", "r:model:1:0"))
    await log.settle(probe_id="r:model:1:1")
    assert cache.records("s", "r", run.etag, after=-1, below=first + 17) is None  # not settled: read next time


async def test_a_tool_step_without_its_call_in_the_settled_range_reads_the_run(store: CountingStore) -> None:
    cache = ConversationCache()
    run = await started_run(store, cache)
    first = run.ordinal * 10**9
    cache.start("s", "r", run.etag, await store_records(store), below=first + 1)
    await store.append_messages("s", [MessageRecord(
        session_id="s", message_id="r:model:1:0", seq=first + 1, role="assistant",
        payload=said("x", "r:model:1:0", "c9").model_dump(mode="json", exclude_none=True))])
    tool = StoreConversationLog(store, "s", "r", first_seq=first + 17, slots=1, after_seq=first - 1)
    tool.use_cache(CacheUse(cache, needs_calls=("c9",), probe_ids=("r:result:c9",)))
    assert [m.message_id for m in await tool.messages()] == ["r:input:0", "r:model:1:0"]
    assert store.reads == 1  # the call is not in the settled range: the run's messages are read


async def store_records(store: CountingStore) -> list[MessageRecord]:
    page = await SqliteSessionStore.list_messages(store, "s")
    return page.items



# ------------------------------------------------------------------------------------------------ shared messages
# The entry's parsed messages are shared by every step that reads them: nothing a step hands to other code may change
# them (chat middleware, tools, the caller of `messages()`).


FIRST_CALL = CallModel(iteration=1, tool_choice="auto")


class AnswerClient:
    """A model that answers "ok" to anything (what it was sent is kept)."""

    def __init__(self) -> None:
        self.sent: list[list[str]] = []

    async def get_response(self, request: ChatRequest) -> ChatResponse:
        self.sent.append([m.text for m in request.messages])
        return ChatResponse(message=Message.assistant("ok"))

    def get_streaming_response(self, request: ChatRequest):  # type: ignore[no-untyped-def]
        raise NotImplementedError


class RewritingMiddleware:
    """Chat middleware that changes the messages it is handed in place (allowed: `ChatContext.messages`)."""

    async def process(self, context: ChatContext, call_next: CallNext) -> None:
        for message in context.messages:
            message.contents.append(TextContent(text=" (seen)"))
        await call_next()


def model_log(store: CountingStore, cache: ConversationCache, run: RunRecord, first_seq: int) -> StoreConversationLog:
    log = StoreConversationLog(store, "s", "r", first_seq=first_seq, slots=16)
    log.use_cache(CacheUse(cache, run_etag=run.etag, whole=True))
    return log


async def test_what_chat_middleware_changes_in_place_reaches_no_later_step(store: CountingStore) -> None:
    cache = ConversationCache()
    run = await started_run(store, cache)
    first = run.ordinal * 10**9
    client = AnswerClient()
    agent = AgentDefinition(name="a", chat_middleware=[RewritingMiddleware()])
    log = model_log(store, cache, run, first + 1)
    await call_model_step(agent, client, log, "r", FIRST_CALL)
    await log.settle(probe_id="r:model:1:1")
    assert client.sent == [["hi (seen)"]]
    second = model_log(store, cache, run, first + 17)
    assert [m.text for m in await second.read()] == ["hi", "ok"] and store.reads == 1  # from the cache, as stored


async def test_a_model_call_without_chat_middleware_shares_the_cached_messages(store: CountingStore) -> None:
    cache = ConversationCache()
    run = await started_run(store, cache)
    first = run.ordinal * 10**9
    log = model_log(store, cache, run, first + 1)
    await call_model_step(AgentDefinition(name="a"), AnswerClient(), log, "r", FIRST_CALL)
    await log.settle(probe_id="r:model:1:1")
    one, two = model_log(store, cache, run, first + 17), model_log(store, cache, run, first + 17)
    assert [id(m) for m in await one.read()] == [id(m) for m in await two.read()]  # parsed once, not per step
    copies = await one.messages()
    copies[0].contents.append(TextContent(text="!"))  # the caller's own copy
    assert [m.text for m in await two.read()] == ["hi", "ok"] and store.reads == 1


async def test_a_tool_that_changes_its_arguments_changes_no_later_step(store: CountingStore) -> None:
    seen: list[dict[str, Any]] = []

    @tool
    def tag(options: dict[str, Any]) -> str:
        options["tags"].append("changed")  # a nested part of the validated arguments
        seen.append(options)
        return "done"

    cache = ConversationCache()
    run = await started_run(store, cache)
    first = run.ordinal * 10**9
    log = model_log(store, cache, run, first + 1)
    call = {"type": "function_call", "call_id": "c1", "name": "tag", "arguments": {"options": {"tags": ["a"]}}}
    await log.read()
    await log.append(Message.model_validate({"role": "assistant", "message_id": "r:model:1:0", "contents": [call]}))
    await log.settle(probe_id="r:model:1:1")
    step = StoreConversationLog(store, "s", "r", first_seq=first + 17, slots=1, after_seq=first - 1)
    step.use_cache(CacheUse(cache, needs_calls=("c1",), probe_ids=("r:result:c1",)))
    agent = AgentDefinition(name="a", tools=[tag])
    outcome = await invoke_tool_step(agent, step, "r", ToolInvocation(call_id="c1", name="tag"))
    assert not outcome.is_error and seen == [{"tags": ["a", "changed"]}]
    await step.settle()
    after = model_log(store, cache, run, first + 18)
    (stored_call,) = [c for m in await after.read() for c in m.function_calls]
    assert stored_call.arguments == {"options": {"tags": ["a"]}} and store.reads == 1


def test_a_record_handed_to_the_cache_is_not_shared_with_it() -> None:
    cache = ConversationCache()
    handed = to_record("s", "r", 0, Message.model_validate({"role": "tool", "message_id": "m0", "contents": [
        {"type": "function_result", "call_id": "c", "result": {"rows": [1]}}]}))
    cache.start("s", "r", "e1", [handed], below=1)
    handed.payload["contents"][0]["result"]["rows"].append(2)  # whoever wrote it changes its payload afterwards
    (cached,) = cache.records("s", "r", "e1", after=-1, below=1) or []
    assert cached.message.function_results[0].result == {"rows": [1]}
