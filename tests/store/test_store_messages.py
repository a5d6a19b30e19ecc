"""Contract: messages (ordering, paging, idempotent upserts, size limit, unicode), run against every backend."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_helpers import message, new_session, run

from session_store import (
    MAX_RECORD_BYTES,
    ConflictError,
    InvalidContinuationError,
    ItemTooLargeError,
    MessageRecord,
    SessionStore,
)


async def test_messages_come_back_ordered_by_seq_whatever_the_write_order(store: SessionStore) -> None:
    session_id = await new_session(store)
    await store.append_messages(session_id, [message(session_id, i) for i in (3, 0, 2)])
    await store.append_messages(session_id, [message(session_id, 1), message(session_id, 4)])
    page = await store.list_messages(session_id)
    assert [m.seq for m in page.items] == [0, 1, 2, 3, 4]
    assert page.continuation is None
    assert await store.count_messages(session_id) == 5
    assert await store.last_seq(session_id) == 4


async def test_paging_returns_every_message_once_in_order(store: SessionStore) -> None:
    session_id = await new_session(store)
    await store.append_messages(session_id, [message(session_id, i) for i in range(23)])
    seqs, token, pages = [], None, 0
    while True:
        page = await store.list_messages(session_id, limit=5, continuation=token)
        seqs += [m.seq for m in page.items]
        pages += 1
        token = page.continuation
        if token is None:
            break
    assert seqs == list(range(23))
    assert pages == 5


async def test_paging_sees_messages_appended_between_pages(store: SessionStore) -> None:
    session_id = await new_session(store)
    await store.append_messages(session_id, [message(session_id, i) for i in range(4)])
    first = await store.list_messages(session_id, limit=3)
    await store.append_messages(session_id, [message(session_id, i) for i in range(4, 6)])
    rest = await store.list_messages(session_id, limit=10, continuation=first.continuation)
    assert [m.seq for m in first.items + rest.items] == list(range(6))


async def test_filters_after_up_to_and_run(store: SessionStore) -> None:
    session_id = await new_session(store)
    records = [message(session_id, i, run_id="run-a" if i < 5 else "run-b") for i in range(10)]
    await store.append_messages(session_id, records)
    window = await store.list_messages(session_id, after_seq=2, up_to_seq=6)
    assert [m.seq for m in window.items] == [3, 4, 5, 6]
    by_run = await store.list_messages(session_id, run_id="run-b", limit=2)
    assert [m.seq for m in by_run.items] == [5, 6]
    rest = await store.list_messages(session_id, run_id="run-b", limit=10, continuation=by_run.continuation)
    assert [m.seq for m in rest.items] == [7, 8, 9]
    assert await store.count_messages(session_id, run_id="run-a") == 5
    with pytest.raises(InvalidContinuationError):
        await store.list_messages(session_id, run_id="run-a", continuation=by_run.continuation)


async def test_duplicate_delivery_never_duplicates(store: SessionStore) -> None:
    session_id = await new_session(store)
    batch = [message(session_id, i) for i in range(10)]
    await asyncio.gather(*(store.append_messages(session_id, batch) for _ in range(5)))
    await store.append_messages(session_id, batch[3:7])
    page = await store.list_messages(session_id, limit=100)
    assert [m.message_id for m in page.items] == [m.message_id for m in batch]
    assert await store.count_messages(session_id) == 10


async def test_redelivery_with_new_content_replaces_the_message(store: SessionStore) -> None:
    session_id = await new_session(store)
    await store.append_messages(session_id, [message(session_id, 0, "draft")])
    await store.append_messages(session_id, [message(session_id, 0, "final")])
    (stored,) = (await store.list_messages(session_id)).items
    assert stored.payload["content"] == "final"


async def test_get_message_reads_one_message_by_id_in_its_session(store: SessionStore) -> None:
    session_id = await new_session(store)
    other = await new_session(store)
    await store.append_messages(session_id, [message(session_id, 0, "draft"), message(session_id, 1)])
    await store.append_messages(session_id, [message(session_id, 0, "final")])
    (first, _) = (await store.list_messages(session_id)).items
    assert await store.get_message(session_id, f"{session_id}-m0") == first
    assert first.payload["content"] == "final" and first.seq == 0
    assert await store.get_message(session_id, "no-such-message") is None
    assert await store.get_message(other, f"{session_id}-m0") is None  # another session's message is not found


async def test_a_seq_belongs_to_one_message(store: SessionStore) -> None:
    session_id = await new_session(store)
    await store.append_messages(session_id, [message(session_id, 0)])
    intruder = message(session_id, 0).model_copy(update={"message_id": "someone-else"})
    with pytest.raises(ConflictError):
        await store.append_messages(session_id, [intruder])
    assert [m.message_id for m in (await store.list_messages(session_id)).items] == [f"{session_id}-m0"]


async def test_unicode_round_trips_exactly(store: SessionStore) -> None:
    session_id = await new_session(store)
    text = "héllo 世界 🚀 مرحبا שלום \u200d\u00a0 tab\t newline\n quote\" backslash\\ \U0001d518\U0001d52b"
    nested = {"parts": [{"type": "text", "text": text}], "ключ": ["ü", 1, 2.5, None, True]}
    await store.append_messages(session_id, [message(session_id, 0, text, extra=nested)])
    (stored,) = (await store.list_messages(session_id)).items
    assert stored.payload == {"content": text, "extra": nested}


def _sized_message(session_id: str, seq: int, total_bytes: int) -> MessageRecord:
    """A message whose record JSON is exactly ``total_bytes`` long."""
    overhead = len(message(session_id, seq, "x").model_dump_json().encode()) - 1
    return message(session_id, seq, "x" * (total_bytes - overhead))


async def test_message_at_the_limit_is_stored_and_read_back(store: SessionStore) -> None:
    session_id = await new_session(store)
    big = _sized_message(session_id, 0, MAX_RECORD_BYTES)
    assert len(big.model_dump_json().encode()) == MAX_RECORD_BYTES
    await store.append_messages(session_id, [big])
    (stored,) = (await store.list_messages(session_id)).items
    assert stored.payload == big.payload


async def test_message_over_the_limit_is_rejected_and_nothing_of_the_batch_is_written(store: SessionStore) -> None:
    session_id = await new_session(store)
    too_big = _sized_message(session_id, 1, MAX_RECORD_BYTES + 1)
    with pytest.raises(ItemTooLargeError) as caught:
        await store.append_messages(session_id, [message(session_id, 0), too_big])
    assert caught.value.size == MAX_RECORD_BYTES + 1
    assert await store.count_messages(session_id) == 0


async def test_multibyte_characters_count_as_bytes(store: SessionStore) -> None:
    session_id = await new_session(store)
    # 700k three-byte characters: 2.1 MB of UTF-8 although only 700k characters.
    with pytest.raises(ItemTooLargeError):
        await store.append_messages(session_id, [message(session_id, 0, "€" * 700_000)])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seqs=st.lists(st.integers(0, 5_000), unique=True, max_size=30), limit=st.integers(1, 12))
async def test_any_write_order_and_page_size_reads_back_sorted_and_complete(
    store: SessionStore, seqs: list[int], limit: int
) -> None:
    session_id = await new_session(store)
    if seqs:
        await store.append_messages(session_id, [message(session_id, s) for s in seqs])
    read, token = [], None
    while True:
        page = await store.list_messages(session_id, limit=limit, continuation=token)
        assert len(page.items) <= limit
        read += [m.seq for m in page.items]
        token = page.continuation
        if token is None:
            break
    assert read == sorted(seqs)


async def test_appending_to_an_open_run_writes_and_gives_the_run_as_read(store: SessionStore) -> None:
    session_id = await new_session(store)
    started = await store.begin_run(run(session_id))
    checked, stored = await store.append_to_open_run(session_id, started.run_id, [message(session_id, 0)])
    assert checked is not None and checked.run_id == started.run_id and not checked.finished
    assert stored is not None and [m.message_id for m in stored] == [f"{session_id}-m0"]
    assert [m.seq for m in (await store.list_messages(session_id)).items] == [0]


async def test_appending_to_a_finished_run_writes_nothing(store: SessionStore) -> None:
    # A step abandoned by a cancel: what it produced must not join the conversation the run has closed.
    session_id = await new_session(store)
    started = await store.begin_run(run(session_id))
    await store.finish_run(started.run_id, "cancelled")
    checked, stored = await store.append_to_open_run(session_id, started.run_id, [message(session_id, 0)])
    assert stored is None
    assert checked is not None and checked.status == "cancelled"
    assert (await store.list_messages(session_id)).items == []


async def test_appending_for_a_run_the_session_does_not_have_writes_as_append_messages_does(
    store: SessionStore,
) -> None:
    session_id, other = await new_session(store), await new_session(store)
    elsewhere = await store.begin_run(run(other))
    await store.finish_run(elsewhere.run_id, "cancelled")  # another session's run: not this session's to close
    for run_id in ("no-such-run", elsewhere.run_id):
        checked, stored = await store.append_to_open_run(session_id, run_id, [message(session_id, 0)])
        assert checked is None and stored is not None
    assert [m.seq for m in (await store.list_messages(session_id)).items] == [0]
