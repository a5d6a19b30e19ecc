"""`StoreConversationLog`: the agent runtime's `ConversationLog` over a `SessionStore` session.

A step reads the whole session (every run's messages, in seq order) and writes its own messages with seqs from the
block the orchestrator reserved for it: the i-th new message gets `first_seq + i`, a message whose id is already
stored keeps its seq (a retried activity rewrites in place, never duplicates).
"""

from __future__ import annotations

from agent_runtime.messages import Message
from session_store import MessageRecord, SessionStore


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

    async def messages(self) -> list[Message]:
        records, _ = await self._read()
        return [Message.model_validate(record.payload) for record in records]

    async def _read(self) -> tuple[list[MessageRecord], dict[str, int]]:
        """The session's records (after `after_seq`) and the seq of each message id, kept for `append`."""
        records = await load_session_records(self._store, self._session_id, after_seq=self._after_seq)
        self._seq_by_id = seq_by_id = {record.message_id: record.seq for record in records}
        return records, seq_by_id

    async def append(self, message: Message) -> None:
        if message.message_id is None:
            raise ValueError("messages written to a session need a message_id")
        seq_by_id = self._seq_by_id if self._seq_by_id is not None else (await self._read())[1]
        seq = seq_by_id.get(message.message_id)
        if seq is None:
            seq = self._next_seq()
            seq_by_id[message.message_id] = seq
        await self._store.append_messages(self._session_id, [to_record(self._session_id, self._run_id, seq, message)])

    def _next_seq(self) -> int:
        if self._first_seq is None:
            raise SeqBlockExhaustedError("this step may not write messages")
        if self._used >= self._slots:
            raise SeqBlockExhaustedError(f"the step wrote more than its {self._slots} reserved message(s)")
        seq = self._first_seq + self._used
        self._used += 1
        return seq


class RunClosedError(RuntimeError):
    """The run closed while the step was working (a cancel abandoned it): what it produced is not written."""


class OpenRunLog(StoreConversationLog):
    """A run's log that refuses writes once the run is finished: a step abandoned by a cancel after its grace period
    must not add to a conversation the run already closed (and the next run may be using)."""

    async def append(self, message: Message) -> None:
        run = await self._store.get_run(self._run_id)
        if run is not None and run.finished:
            raise RunClosedError(f"run {self._run_id} is {run.status}; the result of its abandoned step is dropped")
        await super().append(message)


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
