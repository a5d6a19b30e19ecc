"""`StoreConversationLog`: the agent runtime's `ConversationLog` over a `SessionStore` session.

A step reads the whole session (every run's messages, in seq order) and writes its own messages with seqs from the
block the orchestrator reserved for it: the i-th new message gets `first_seq + i`, a message whose id is already
stored keeps its seq (a retried activity rewrites in place, never duplicates).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from agent_runs.conversation_cache import ConversationCache, StoredMessage, own_copy
from agent_runtime.messages import (
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    Message,
)
from session_store import MessageRecord, RunRecord, SessionStore


@dataclass(frozen=True)
class CacheUse:
    """How a step's log may use the process's `ConversationCache` (see there for why it cannot serve stale data).

    `run_etag`: the run record's ETag as the step read it (None: the log reads the record itself when the cache has
    something for the run). `whole`: the step reads the whole session with nothing of the run in flight below its
    block (`call_model`), so a read from the store starts the run's entry, and a hit must cover everything below
    the block. Otherwise a hit is the settled part of the run that starts right after `after_seq`, and must hold the
    function calls `needs_calls` (with the decision on each that asked for approval) and the messages `needs_ids`.
    `probe_ids`: messages an earlier attempt of the step may have stored (read by id on a hit)."""

    cache: ConversationCache
    run_etag: str | None = None
    whole: bool = False
    needs_calls: Sequence[str] = ()
    needs_ids: Sequence[str] = ()
    probe_ids: Sequence[str] = ()


def _holds_calls(stored: Sequence[StoredMessage], call_ids: Sequence[str]) -> bool:
    """Whether the messages hold every one of these function calls and, for a call that asked for approval, the
    decision on it: an approver's edited arguments are the ones the tool runs with, and a decision applied by a step
    in another process is in a block this process has not settled (the settled part then ends before it, holding the
    call and its request only: a miss, read from the store)."""
    missing = set(call_ids)
    requested: set[str] = set()
    decided: set[str] = set()
    for message in stored:
        for content in message.message.contents:
            if isinstance(content, FunctionCallContent):
                missing.discard(content.call_id)
            elif isinstance(content, FunctionApprovalRequestContent):
                if content.function_call.call_id in call_ids:
                    requested.add(content.id)
            elif isinstance(content, FunctionApprovalResponseContent):
                decided.add(content.id)
    return not missing and requested <= decided


class SeqBlockExhaustedError(RuntimeError):
    """A step wrote more messages than the orchestrator reserved for it."""


class StoreConversationLog:
    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        run_id: str,
        *,
        first_seq: int | None = None,
        slots: int = 1,
        after_seq: int | None = None,
    ) -> None:
        """`after_seq`: read only the messages after it (a step that needs its run's messages, not the session's
        whole conversation, reads the run's seq range and stays O(run) however long the session grows)."""
        self._store = store
        self._after_seq = after_seq
        self._session_id = session_id
        self._run_id = run_id
        self._first_seq = first_seq
        self._slots = slots
        self._used = 0
        self._seq_by_id: dict[str, int] | None = None
        self._cache_use: CacheUse | None = None
        # What is known to stand in the step's own block: messages read, records this log appended (its own).
        self._block: dict[str, MessageRecord | StoredMessage] = {}

    def use_cache(self, use: CacheUse) -> None:
        self._cache_use = use

    async def messages(self) -> list[Message]:
        stored, _ = await self._read()
        return [message.copy() for message in stored]

    async def read(self) -> list[Message]:
        """`messages()` shared with the process's conversation cache (see `ConversationLog.read`)."""
        stored, _ = await self._read()
        return [message.message for message in stored]

    async def _read(self) -> tuple[list[StoredMessage], dict[str, int]]:
        """The session's messages (after `after_seq`) in seq order, and the seq of each id (kept for `append`)."""
        stored = await self._cached()
        if stored is None:
            records = await load_session_records(self._store, self._session_id, after_seq=self._after_seq)
            use = self._cache_use
            # (measured only by a log that uses the cache: what it read may enter it)
            stored = [StoredMessage.of(record, owned=True, sized=use is not None) for record in records]
            self._note_block(stored)
            if use is not None and use.whole and self._first_seq is not None and self._after_seq is None:
                use.cache.start(self._session_id, self._run_id, use.run_etag, stored, below=self._first_seq)
        self._seq_by_id = seq_by_id = {message.message_id: message.seq for message in stored}
        return stored, seq_by_id

    async def _cached(self) -> list[StoredMessage] | None:
        use = self._cache_use
        if use is None or self._first_seq is None or not use.cache.has(self._session_id, self._run_id):
            return None
        etag = use.run_etag
        if etag is None:
            run = await self._store.get_run(self._run_id, session_id=self._session_id)
            etag = None if run is None else run.etag
            self._cache_use = use = replace(use, run_etag=etag)
        after = -1 if self._after_seq is None else self._after_seq
        stored = use.cache.records(
            self._session_id, self._run_id, etag, after=after, below=self._first_seq if use.whole else None
        )
        if stored is None:
            return None
        ids = {message.message_id for message in stored}
        if not ids.issuperset(use.needs_ids):
            return None
        if use.needs_calls and not _holds_calls(stored, use.needs_calls):
            return None
        probed = False
        for message_id in use.probe_ids:
            found = await self._store.get_message(self._session_id, message_id)
            if found is not None and found.message_id not in ids:
                stored.append(StoredMessage.of(found, owned=True))
                probed = True
        self._note_block(stored)
        return sorted(stored, key=lambda message: message.seq) if probed else stored

    def _note_block(self, messages: Sequence[MessageRecord | StoredMessage]) -> None:
        if self._first_seq is not None:
            high = self._first_seq + self._slots
            self._block.update({m.message_id: m for m in messages if self._first_seq <= m.seq < high})

    @property
    def block_ids(self) -> set[str]:
        """The ids known to stand in the step's block (read there, or written by this log)."""
        return set(self._block)

    async def settle(self, probe_id: str | None = None) -> None:
        """The step completed: its block holds what it wrote (and what an earlier attempt left, as read). `probe_id`:
        the id an earlier attempt would have written after the last one this attempt wrote - if it is stored, the
        block holds more than this log knows and stays unsettled."""
        use = self._cache_use
        if use is None or self._first_seq is None or self._seq_by_id is None:
            return
        unknown = probe_id is not None and probe_id not in self._block
        if unknown and await self._store.get_message(self._session_id, probe_id) is not None:  # type: ignore[arg-type]
            return
        written = [StoredMessage.of(message, owned=True) for message in self._block.values()]  # records: appended
        high = self._first_seq + self._slots
        use.cache.settle_block(self._session_id, self._run_id, use.run_etag, written, low=self._first_seq, high=high)

    async def append(self, message: Message) -> None:
        if message.message_id is None:
            raise ValueError("messages written to a session need a message_id")
        seq_by_id = self._seq_by_id if self._seq_by_id is not None else (await self._read())[1]
        seq = seq_by_id.get(message.message_id)
        if seq is None:
            seq = self._next_seq()
            seq_by_id[message.message_id] = seq
        (stored,) = await self._write(to_record(self._session_id, self._run_id, seq, message))
        self._note_block([stored])
        outside = self._first_seq is None or not self._first_seq <= seq < self._first_seq + self._slots
        if outside and self._cache_use is not None:  # an older message replaced in place: the entry may hold it
            self._cache_use.cache.forget(self._session_id, self._run_id)

    async def _write(self, record: MessageRecord) -> list[MessageRecord]:
        return await self._store.append_messages(self._session_id, [record])

    def _next_seq(self) -> int:
        if self._first_seq is None:
            raise SeqBlockExhaustedError("this step may not write messages")
        if self._used >= self._slots:
            raise SeqBlockExhaustedError(f"the step wrote more than its {self._slots} reserved message(s)")
        seq = self._first_seq + self._used
        self._used += 1
        return seq


class SnapshotLog(StoreConversationLog):
    """A log read once: later reads answer from that read plus this log's own writes, not from the store again.
    Only for a step that is the one writer of what it reads: `finish_run`, the run's last step (the steps before it
    have completed, so nothing else writes to the run's range while it closes the run)."""

    _snapshot: list[Message] | None = None

    async def read(self) -> list[Message]:
        if self._snapshot is None:
            self._snapshot = await super().read()
        return list(self._snapshot)

    async def messages(self) -> list[Message]:
        return [own_copy(message) for message in await self.read()]

    async def append(self, message: Message) -> None:
        await super().append(message)
        if self._snapshot is not None:
            ids = [m.message_id for m in self._snapshot]
            if message.message_id in ids:  # rewritten in place (a retried step): same position
                self._snapshot[ids.index(message.message_id)] = message
            else:
                self._snapshot.append(message)


class RunClosedError(RuntimeError):
    """The run closed while the step was working (a cancel abandoned it): what it produced is not written."""


class OpenRunLog(StoreConversationLog):
    """A run's log that refuses writes once the run is finished: a step abandoned by a cancel after its grace period
    must not add to a conversation the run already closed (and the next run may be using). `checked`: the run as
    read by the last write's check."""

    checked: RunRecord | None = None

    async def _write(self, record: MessageRecord) -> list[MessageRecord]:
        # The check and the write are one store operation: one transaction on SQLite (on Cosmos a read, then the write).
        self.checked, stored = await self._store.append_to_open_run(self._session_id, self._run_id, [record])
        if stored is None:
            status = self.checked.status if self.checked is not None else "closed"
            raise RunClosedError(f"run {self._run_id} is {status}; the result of its abandoned step is dropped")
        return stored


def to_record(session_id: str, run_id: str | None, seq: int, message: Message) -> MessageRecord:
    if message.message_id is None:
        raise ValueError("messages written to a session need a message_id")
    return MessageRecord(
        session_id=session_id,
        message_id=message.message_id,
        seq=seq,
        run_id=run_id,
        role=message.role,
        payload=message.model_dump(mode="json", exclude_none=True),
        created_at=message.created_at,
    )


async def load_session_records(
    store: SessionStore, session_id: str, *, after_seq: int | None = None, up_to_seq: int | None = None
) -> list[MessageRecord]:
    """Every message of the session in seq order (all pages)."""
    records: list[MessageRecord] = []
    continuation: str | None = None
    while True:
        page = await store.list_messages(
            session_id, after_seq=after_seq, up_to_seq=up_to_seq, limit=500, continuation=continuation
        )
        records.extend(page.items)
        continuation = page.continuation
        if not continuation:
            return records
