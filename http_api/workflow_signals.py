"""Queue a workflow signal, once per `Idempotency-Key`.

A signal is consumed by the next `SignalStep` of its name, so a client that sends it again after a lost response (a
timeout, a 503) would feed a second step with a copy. With an `Idempotency-Key`, the same key and body from the same
principal queue one signal. The key is claimed as a run start's is (`idempotency.claim_in`), in a ledger of its own
in the workflow's control session (so it lives as long as the workflow, and of concurrent requests exactly one
appends); the claim's `.done` entry says which queue position it got, and a repeat answers with that position (and
rings it again, harmlessly: each position has an event name of its own). A claim whose request died before queuing
its signal (no `.done`, the claimed signal id not in the queue) is taken over once `ABANDONED_AFTER` old.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from http_api import idempotency
from http_api.caller import current_principal
from http_api.idempotency import Claim, Ledger, Marks
from session_store import SessionStore, SignalRecord

KIND = "signal_idempotency"
ENTRY_PREFIX = "signal-key."
REPLAY_WAIT_SECONDS = 5.0
PAGE = 100


class QueuedSignal(BaseModel):
    """Where a signal went (what the 202 says; its `.done` entry: the payload stays in the queue only)."""

    signal_id: str
    index: int


def _ledger(session_id: str, key: str) -> Ledger:
    """The ledger of (caller, key) in the workflow's control session: hashed, so no caller-chosen text becomes a
    store id; a kind of its own, so reading it reads no other key's entries."""
    digest = idempotency.key_digest(current_principal(), key)
    return Ledger(
        session_id, result_field="signal_id", kind=f"{KIND}.{digest}", prefix=f"{ENTRY_PREFIX}{digest}.",
        window=None, making="queuing its signal",
        reused="This key sent a signal with a different name or payload to this workflow; use a new key for a new "
        "signal.",
    )


async def append_once(
    store: SessionStore, session_id: str, name: str, payload: Any, key: str | None
) -> QueuedSignal:
    """The signal queued for this request: appended now, or (same key and body as before) the one appended then."""
    if key is None:
        return _queued(await store.append_signal(session_id, name, uuid.uuid4().hex, payload))
    scan = _QueueScan(store, name)  # one scan: a look at the queue while claiming is not read again after
    claim = await idempotency.claim_in(
        store, _ledger(session_id, key), _fingerprint(name, payload), uuid.uuid4().hex, scan.holds
    )
    if not claim.first:
        return await idempotency.made_result(store, claim, lambda marks: scan.found(claim, marks), REPLAY_WAIT_SECONDS)
    try:
        queued = _queued(await store.append_signal(session_id, name, claim.result_id, payload))
    except Exception:
        # A failed append may have been written all the same (a timeout after the store took it): released then, the
        # key would let a retry queue a copy. So it is released only when the queue does not hold its signal.
        if (found := await scan.in_queue(claim)) is None:
            await idempotency.release(store, claim)
            raise
        queued = found
    await idempotency.settle(store, claim, queued.model_dump(mode="json"))
    return queued


async def accepted_before(
    store: SessionStore, session_id: str, name: str, payload: Any, key: str | None
) -> QueuedSignal | None:
    """The signal this key and body queued earlier, if any: a retry after the workflow finished is told what the
    first request was (202, its index), not that the workflow refuses signals, which would say it was never taken."""
    if key is None:
        return None
    found = await idempotency.latest_claim(store, _ledger(session_id, key))
    if found is None:
        return None
    claim, marks = found
    if claim.entry.payload.get("fingerprint") != _fingerprint(name, payload):
        return None
    return await _QueueScan(store, name).found(claim, marks)


def _fingerprint(name: str, payload: Any) -> str:
    return idempotency.fingerprint(f"workflow_signals/{name}", {"payload": payload})


def _queued(signal: SignalRecord) -> QueuedSignal:
    return QueuedSignal(signal_id=signal.signal_id, index=signal.index)


@dataclass
class _QueueScan:
    """Finds a claim's signal: its `.done` entry, else the claimed signal id in the queue of `name`. The store reads
    signals by index only (not by id), but the queue is append-only with indexes handed out in order: each look at it
    for the same claim reads only what was appended since the last one."""

    store: SessionStore
    name: str
    signal_id: str = ""
    next_index: int = 1
    hit: QueuedSignal | None = None

    async def found(self, claim: Claim, marks: Marks) -> QueuedSignal | None:
        if (done := marks.get(claim.mark("done"))) is not None:
            return QueuedSignal.model_validate(done.payload)
        return await self.in_queue(claim)

    async def holds(self, claim: Claim) -> bool:
        return await self.in_queue(claim) is not None

    async def in_queue(self, claim: Claim) -> QueuedSignal | None:
        if claim.result_id != self.signal_id:  # another claim (a generation taken over meanwhile): look from the start
            self.signal_id, self.next_index, self.hit = claim.result_id, 1, None
        while self.hit is None and (page := await self.store.list_signals(
            claim.partition, self.name, from_index=self.next_index, limit=PAGE
        )):
            self.next_index = page[-1].index + 1
            self.hit = next((_queued(s) for s in page if s.signal_id == claim.result_id), None)
        return self.hit
