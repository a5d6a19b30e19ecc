"""Queue a workflow signal, once per `Idempotency-Key`.

A signal is consumed by the next `SignalStep` of its name, so a client that sends it again after a lost response (a
timeout, a 503) would feed a second step with a copy. With an `Idempotency-Key`, the same key and body from the same
principal queue one signal: the key's claim is an entry of the workflow's effect ledger (the store's conditional
create, so of concurrent requests exactly one appends); its `.done` entry says which queue position it got, and a
repeat answers with that position (and rings it again, harmlessly: each position has an event name of its own).
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from typing import Any

from pydantic import BaseModel

from http_api import idempotency
from http_api.caller import current_principal
from http_api.problems import ApiProblem
from session_store import EffectRecord, SessionStore, SignalRecord

KIND = "signal_idempotency"
ENTRY_PREFIX = "signal-key."
REPLAY_WAIT_SECONDS = 5.0


class QueuedSignal(BaseModel):
    """Where a signal went (what the 202 says; its `.done` entry: the payload stays in the queue only)."""

    signal_id: str
    index: int


def _entry(key: str) -> str:
    """The ledger key of (caller, key): hashed, so no caller-chosen text becomes a store id."""
    return ENTRY_PREFIX + hashlib.sha256(f"{current_principal().id}\n{key}".encode()).hexdigest()[:48]


async def append_once(
    store: SessionStore, session_id: str, name: str, payload: Any, key: str | None
) -> QueuedSignal:
    """The signal queued for this request: appended now, or (same key and body as before) the one appended then."""
    if key is None:
        return _queued(await store.append_signal(session_id, name, uuid.uuid4().hex, payload))
    entry = _entry(key)
    request_fingerprint = _fingerprint(name, payload)
    signal_id = uuid.uuid4().hex
    claim, created = await store.record_effect(
        session_id, entry, KIND, {"fingerprint": request_fingerprint, "signal_id": signal_id}
    )
    if claim.payload.get("fingerprint") != request_fingerprint:
        raise _reused()
    if not created:
        return await _appended(store, session_id, entry, name, str(claim.payload.get("signal_id")))
    try:
        signal = await store.append_signal(session_id, name, signal_id, payload)
    except Exception:
        await store.record_effect(session_id, f"{entry}.failed", KIND, {})
        raise
    queued = _queued(signal)
    await store.record_effect(session_id, f"{entry}.done", KIND, queued.model_dump(mode="json"))
    return queued


async def accepted_before(
    store: SessionStore, session_id: str, name: str, payload: Any, key: str | None
) -> QueuedSignal | None:
    """The signal this key and body queued earlier, if any: a retry after the workflow finished is told what the
    first request was (202, its index), not that the workflow refuses signals, which would say it was never taken."""
    if key is None:
        return None
    entry = _entry(key)
    marks = await _ledger(store, session_id)
    claim = marks.get(entry)
    if claim is None or claim.payload.get("fingerprint") != _fingerprint(name, payload):
        return None
    if (done := marks.get(f"{entry}.done")) is not None:
        return QueuedSignal.model_validate(done.payload)
    return await _in_queue(store, session_id, name, str(claim.payload.get("signal_id")))


async def _ledger(store: SessionStore, session_id: str) -> dict[str, EffectRecord]:
    """The workflow's signal-key entries (claims and their `.done` / `.failed` marks) by ledger key."""
    return {e.key: e for e in await store.list_effects(session_id, kind=KIND)}


def _fingerprint(name: str, payload: Any) -> str:
    return idempotency.fingerprint(f"workflow_signals/{name}", {"payload": payload})


def _queued(signal: SignalRecord) -> QueuedSignal:
    return QueuedSignal(signal_id=signal.signal_id, index=signal.index)


async def _appended(store: SessionStore, session_id: str, entry: str, name: str, signal_id: str) -> QueuedSignal:
    """The signal the key's first request queued, once it has (it may still be doing so; or it died between the
    append and its `.done` entry: then the queue holds the claimed `signal_id`)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + REPLAY_WAIT_SECONDS
    delay = 0.01
    while True:
        marks = await _ledger(store, session_id)
        done = marks.get(f"{entry}.done")
        if done is not None:
            return QueuedSignal.model_validate(done.payload)
        if f"{entry}.failed" in marks:
            raise _busy("The first request with this key failed before queuing its signal; use a new key.")
        if (found := await _in_queue(store, session_id, name, signal_id)) is not None:
            return found
        if loop.time() > deadline:
            raise _busy("The first request with this key has not queued its signal yet.")
        await asyncio.sleep(delay)  # the first request appends within milliseconds; there is no event to await
        delay = min(delay * 2, 0.25)


async def _in_queue(store: SessionStore, session_id: str, name: str, signal_id: str) -> QueuedSignal | None:
    index = 1
    while page := await store.list_signals(session_id, name, from_index=index, limit=100):
        for signal in page:
            if signal.signal_id == signal_id:
                return _queued(signal)
        index = page[-1].index + 1
    return None


def _reused() -> ApiProblem:
    return ApiProblem(
        422, "idempotency_key_reused", "Idempotency-Key reused with another request",
        "This key sent a signal with a different name or payload to this workflow; use a new key for a new signal.",
        field="header.Idempotency-Key",
    )


def _busy(detail: str) -> ApiProblem:
    return ApiProblem(
        409, "idempotency_key_busy", "The first request with this key is still queuing its signal",
        f"{detail} Retry in a moment.", headers={"Retry-After": "1"},
    )
