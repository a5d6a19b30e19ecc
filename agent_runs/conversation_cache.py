"""What this process's steps of a run read and wrote of its session's conversation, so the run's next step in the
same process does not query the session again (a Cosmos query per step is most of a run's reads).

An entry belongs to one run of one session and remembers message records and the seq ranges they *settle*: a range
is settled when every message stored in it is in the entry, as stored. Ranges are settled only by
- a whole read of the session made by a step with nothing of the run in flight below its own block (`call_model`:
  every step before it has completed, so every message below its first seq is written and final), or by the start
  of a run in a new session (nothing is stored but the input the request itself wrote), and
- a step that completed: its own block (the seqs the orchestrator reserved for it, written by it alone), with what it
  wrote there - and only once it has checked that no earlier attempt of the step left more behind (see
  `settle_block`).

Why a settled range cannot go stale: seqs are handed out by the orchestrator (deterministically, never twice), a step
writes only inside its own block, and a completed step's block is not written again by the run - with one exception,
a rewind (`reopen_run`), which executes a failed step again and replaces messages in place (a closed call's result,
the step's answer). Every rewind changes the run record, so an entry is bound to the run record's ETag: a step
compares it with the record it reads anyway (the cancel check) and a mismatch drops the entry (the step then reads the
session as before). Runs of a session are sequential, so nothing else writes to the session while the run holds it;
a step abandoned by a cancel writes nothing once the run is closed (`OpenRunLog`).

A miss is never wrong, only a read: another process's entry, a run changed in between (an approval step marks the
run), a step whose block is not settled. Bounded in runs, in messages and in the size of their stored JSON (least
recently used runs go first): a message may be a tool result as large as the store's 2 MB item, so a count alone
would let a long-lived host hold gigabytes.

An entry holds each message parsed once (`StoredMessage`), and hands the same objects to every step that reads it:
parsing and copying the conversation on every step cost more than the rest of the cache's work. Nothing changes
them: a message enters from its own copy of the stored JSON (`StoredMessage.of`), and a step that passes messages
to code that may change what it is handed (chat middleware, run middleware, tools' arguments) takes copies
(`ConversationLog.messages()`, `copy_json`); the steps that read without copying are listed in `ConversationLog.read`.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from agent_runtime.messages import Message, copy_json
from session_store import MessageRecord

MAX_RUNS = 512
MAX_RECORDS = 20_000  # messages held in all (a message of 1-2 KB of JSON, parsed: tens of MB at most)
MAX_JSON_CHARS = 32_000_000  # characters of the held messages' stored JSON, in all (large tool results)

_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # json.dumps without an encoder per call


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as stored at `seq`, parsed once. `message` is shared by every reader: read-only (see above).
    `size`: characters of its stored JSON (what the cache's size bound counts; -1: not measured)."""

    message_id: str
    seq: int
    message: Message
    size: int = -1

    @classmethod
    def of(cls, record: MessageRecord | StoredMessage, *, owned: bool = False, sized: bool = True) -> StoredMessage:
        """From a record, parsed from a copy of its payload (whoever holds the record may change it) unless the
        record is `owned`: one the store just returned to the caller, who keeps it to itself (`SessionStore`: a
        returned record is the caller's). `sized`: measure it (what may enter the cache)."""
        if isinstance(record, StoredMessage):
            return record
        payload = record.payload if owned else copy_json(record.payload)
        size = len(_JSON.encode(payload)) if sized else -1
        return cls(record.message_id, record.seq, Message.model_validate(payload), size)

    def sized(self) -> StoredMessage:
        """This message, measured (one that was not is measured from its parsed form)."""
        if self.size >= 0:
            return self
        size = len(self.message.model_dump_json(exclude_none=True))
        return StoredMessage(self.message_id, self.seq, self.message, size)

    def copy(self) -> Message:
        """A copy of the message that its holder may change (as a read from the store would parse it)."""
        return own_copy(self.message)


def own_copy(message: Message) -> Message:
    """A message that shares nothing with `message`: its stored JSON, parsed again."""
    return Message.model_validate(message.model_dump(mode="json", exclude_none=True))


@dataclass
class _Entry:
    run_etag: str
    records: dict[str, StoredMessage] = field(default_factory=dict)  # by message id
    settled: list[tuple[int, int]] = field(default_factory=list)  # [low, high) seq ranges, merged and sorted
    size: int = 0  # the records' `size`, summed

    def covers(self, low: int, high: int) -> bool:
        return low >= high or any(a <= low and high <= b for a, b in self.settled)

    def settled_end(self, low: int) -> int | None:
        """The end of the settled range holding `low`."""
        return next((b for a, b in self.settled if a <= low < b), None)

    def settle(self, low: int, high: int) -> None:
        merged: list[tuple[int, int]] = []
        for a, b in sorted([*self.settled, (low, high)]):
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        self.settled = merged


class ConversationCache:
    def __init__(
        self, max_runs: int = MAX_RUNS, max_records: int = MAX_RECORDS, max_json_chars: int = MAX_JSON_CHARS
    ) -> None:
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._held = 0  # records held by all entries
        self._held_chars = 0  # their `size`, summed
        self._max_runs = max_runs
        self._max_records = max_records
        self._max_json_chars = max_json_chars
        self._lock = threading.Lock()  # activities of one process may run on several threads

    def held(self) -> tuple[int, int]:
        """(runs, message records) held now."""
        with self._lock:
            return len(self._entries), self._held

    def has(self, session_id: str, run_id: str) -> bool:
        """Whether checking the run's ETag could pay off (saves that read when nothing is remembered)."""
        with self._lock:
            return (session_id, run_id) in self._entries

    def records(
        self, session_id: str, run_id: str, run_etag: str | None, *, after: int, below: int | None
    ) -> list[StoredMessage] | None:
        """The stored messages with `after` < seq < `below`, in seq order, if that range is settled for the run as it
        is now (`run_etag`: its record's current ETag); None otherwise (and a stale entry is dropped). `below` None:
        up to the end of the settled range that starts right after `after` (None if none does)."""
        with self._lock:
            entry = self._entries.get((session_id, run_id))
            if entry is None:
                return None
            if run_etag is None or entry.run_etag != run_etag:
                self._drop((session_id, run_id))
                return None
            low = max(after + 1, 0)
            if below is None:
                below = entry.settled_end(low)
                if below is None:
                    return None
            if not entry.covers(low, below):
                return None
            self._entries.move_to_end((session_id, run_id))
            found = [r for r in entry.records.values() if after < r.seq < below]
        return sorted(found, key=_by_seq)

    def start(
        self,
        session_id: str,
        run_id: str,
        run_etag: str | None,
        records: Iterable[MessageRecord | StoredMessage],
        *,
        below: int,
    ) -> None:
        """`records`: every stored message of the session below `below`, read (or written) with nothing in flight
        there, while the run's record had `run_etag`. Starts the run's entry afresh."""
        if run_etag is None:
            return
        kept = {r.message_id: StoredMessage.of(r).sized() for r in records if r.seq < below}
        entry = _Entry(run_etag=run_etag, records=kept, size=sum(r.size for r in kept.values()))
        entry.settle(0, below)
        with self._lock:
            self._drop((session_id, run_id))
            self._entries[(session_id, run_id)] = entry
            self._held += len(kept)
            self._held_chars += entry.size
            self._trim()

    def settle_block(
        self,
        session_id: str,
        run_id: str,
        run_etag: str | None,
        written: Iterable[MessageRecord | StoredMessage],
        *,
        low: int,
        high: int,
    ) -> None:
        """A step completed: `written` is what now stands in its block [`low`, `high`) - everything stored there
        (the caller checked that no earlier attempt left anything else). Ignored unless the run's entry is at
        `run_etag` (the record the step checked)."""
        if run_etag is None:
            return
        settled = [StoredMessage.of(r).sized() for r in written if low <= r.seq < high]
        with self._lock:
            entry = self._entries.get((session_id, run_id))
            if entry is None or entry.run_etag != run_etag:
                return
            before, size_before = len(entry.records), entry.size
            for message in settled:
                replaced = entry.records.get(message.message_id)
                entry.size += message.size - (replaced.size if replaced is not None else 0)
                entry.records[message.message_id] = message
            self._held += len(entry.records) - before
            self._held_chars += entry.size - size_before
            entry.settle(low, high)
            self._trim()

    def _trim(self) -> None:
        """Least recently used runs go first, until every bound holds (a run too long for them is not kept)."""
        while self._entries and (
            len(self._entries) > self._max_runs
            or self._held > self._max_records
            or self._held_chars > self._max_json_chars
        ):
            _, entry = self._entries.popitem(last=False)
            self._held -= len(entry.records)
            self._held_chars -= entry.size

    def _drop(self, key: tuple[str, str]) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._held -= len(entry.records)
            self._held_chars -= entry.size

    def run_changed(self, session_id: str, run_id: str, old_etag: str | None, new_etag: str | None) -> None:
        """This process changed the run's record from `old_etag` to `new_etag` (an ETag-conditioned write that
        succeeded, so nothing else - no rewind - changed it in between): an entry at `old_etag` stays valid."""
        with self._lock:
            entry = self._entries.get((session_id, run_id))
            if entry is not None and old_etag is not None and new_etag is not None and entry.run_etag == old_etag:
                entry.run_etag = new_etag

    def forget(self, session_id: str, run_id: str) -> None:
        with self._lock:
            self._drop((session_id, run_id))


def _by_seq(message: StoredMessage) -> int:
    return message.seq
