"""`Idempotency-Key` on `POST .../runs`: the same key and body from the same principal within 24 h start one run.

The key's ledger lives in the store's effect ledger, in a partition of its own per (principal, key) (ids hashed, so no
caller-chosen text becomes a partition key; the partition's prefix is reserved, so no client-supplied session id can
name it: `http_api/reserved_ids.py`). Each use of the key is a *generation* entry created with the store's conditional
create: of 20 concurrent starts exactly one creates it and starts the run; the others read it and answer with that run,
as a poll would. A start that fails before its run exists, or whose run it closed before it asked for its orchestration
(`start_failed`: it never runs), marks its generation failed, so the key can be retried - only once its run is provably
absent or so closed (`run_lifecycle.create_and_start`): a failed write of the run may have landed all the same, or land
later, and a released key would then start a second run; after 24 h the next use opens a new generation. A generation
whose create landed though the store reported a failure is the request's own when it names the request's new result id
(`_create_generation`). A start that died before its run existed without marking its generation (its process ended, or
the store failed the mark too) leaves a generation with no run: once it is `ABANDONED_AFTER` old, the next use marks it
failed itself, so the key is not stuck "busy" for the rest of the 24 h. One that died after writing its run, before
starting its orchestration, leaves a run that never starts: once as old, the next use starts it (`take_over`,
`run_lifecycle.RunStart.unstarted`).

The same claim serves workflow signals (`workflow_signals.py`): a `Ledger` says where a key's generations live and
how long they answer, and the caller says how to tell that a claim's result exists (`ResultCheck`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import azure.functions as func

from http_api.access import stored_run
from http_api.identity import Principal
from http_api.problems import ApiProblem
from http_api.reserved_ids import IDEMPOTENCY_PARTITION_PREFIX
from session_store import EffectRecord, RunRecord, SessionStore, StoreUnavailableError

HEADER = "Idempotency-Key"
KIND = "idempotency"
WINDOW = timedelta(hours=24)
MAX_KEY_LENGTH = 255
REPLAY_WAIT_SECONDS = 15.0
# A start creates its run within milliseconds of claiming the key, and no HTTP request outlives Azure's 230 s front-end
# timeout by much: a generation this old without its run belongs to a start that died in between.
ABANDONED_AFTER = timedelta(minutes=5)

ResultT = TypeVar("ResultT")


@dataclass(frozen=True)
class Ledger:
    """Where one key's claims live and what they are for: entries of the store's effect ledger in `partition`, of
    `kind`, keyed `prefix` + a generation number (marked given up by that + `.failed`, answered by that + `.done`).
    A generation answers for its key for `window` (None: as long as the ledger lives); `making` ("starting its run")
    and `reused` (the detail of a reuse with another body) word the problems."""

    partition: str
    result_field: str = "run_id"
    kind: str = KIND
    prefix: str = ""
    window: timedelta | None = WINDOW
    making: str = "starting its run"
    reused: str = "This key started a run with a different body in the last 24 hours; use a new key for a new request."

    def generation_of(self, entry: EffectRecord) -> str | None:
        rest = entry.key.removeprefix(self.prefix)
        return rest if entry.key.startswith(self.prefix) and rest.isdigit() else None


@dataclass(frozen=True)
class Claim:
    """A request's claim of its key: its generation's `entry`. `first`: this request makes the result `result_id`;
    otherwise it answers with `result_id`, which another request with the same key and body made (or is making)."""

    ledger: Ledger
    entry: EffectRecord
    first: bool

    @property
    def partition(self) -> str:
        return self.ledger.partition

    @property
    def generation(self) -> str:
        return self.entry.key.removeprefix(self.ledger.prefix)

    @property
    def result_id(self) -> str:
        return str(self.entry.payload.get(self.ledger.result_field))

    def mark(self, suffix: str) -> str:
        """The ledger key of this generation's `.failed` or `.done` mark."""
        return f"{self.entry.key}.{suffix}"


# A key's ledger entries (its generations and their marks) by ledger key.
Marks = dict[str, EffectRecord]

# Is the claimed result there (the run created, the signal queued)? Asked of a claim old enough to be abandoned.
ResultCheck = Callable[[Claim], Awaitable[bool]]


def key_of(req: func.HttpRequest) -> str | None:
    key = req.headers.get(HEADER)
    if key is None:
        return None
    # A comma is refused: two Idempotency-Key headers reach the function comma-joined ("k1,k2", as the Functions host
    # passes a repeated header), and a retry sending only one of them would then be another key.
    if not key.strip() or len(key) > MAX_KEY_LENGTH or not key.isprintable() or "," in key:
        raise ApiProblem(
            422, "invalid_idempotency_key", "Invalid Idempotency-Key",
            f"Send one Idempotency-Key of 1-{MAX_KEY_LENGTH} printable characters, without a comma.",
            field="header.Idempotency-Key",
        )
    return key


def fingerprint(route: str, body: dict[str, Any]) -> str:
    """What "the same request" means: the route and the body (without `wait_seconds`, which only shapes the answer)."""
    data = {k: v for k, v in body.items() if k != "wait_seconds"}
    canonical = json.dumps({"route": route, "body": data}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def key_digest(caller: Principal, key: str) -> str:
    """(principal, key) hashed: a key is the caller's own, and no caller-chosen text becomes a store id."""
    return hashlib.sha256(f"{caller.id}\n{key}".encode()).hexdigest()[:48]


def run_ledger(caller: Principal, key: str) -> Ledger:
    """The ledger of a key of run starts: a partition of its own per (principal, key)."""
    return Ledger(IDEMPOTENCY_PARTITION_PREFIX + key_digest(caller, key))


async def claim(
    store: SessionStore, caller: Principal, key: str, request_fingerprint: str, new_run_id: str,
    on_abandoned: Callable[[Claim], Awaitable[None]] | None = None,
) -> Claim:
    """Claim a key of run starts for `new_run_id` (or learn which run it started). `on_abandoned`: what to clear up of
    a claim given up because its request died before writing its run (what it made before, e.g. a fork's copy)."""
    return await claim_in(
        store, run_ledger(caller, key), request_fingerprint, new_run_id, _run_exists(store, on_abandoned)
    )


def _run_exists(store: SessionStore, on_abandoned: Callable[[Claim], Awaitable[None]] | None = None) -> ResultCheck:
    async def exists(claim: Claim) -> bool:
        # A start closed unwritten (its failed request's `start_interrupted` record, left to stop a late write) is no
        # run the key started: had its key's release failed too, retries would replay a failed run for 24 hours.
        if await stored_run(store, claim.result_id) is not None:
            return True
        if on_abandoned is not None:
            await on_abandoned(claim)
        return False

    return exists


async def claim_in(
    store: SessionStore, ledger: Ledger, request_fingerprint: str, new_result_id: str, result_exists: ResultCheck
) -> Claim:
    """Claim the key of `ledger` for `new_result_id`: of concurrent requests exactly one creates the generation (the
    store's conditional create). A generation given up (`.failed`), past its window, or abandoned (its request died
    before making its result: no `.done` and `result_exists` says no, once `ABANDONED_AFTER` old) is followed by a
    new one; another is replayed (the same body) or refused (another body: 422)."""
    for _ in range(5):  # each round either decides or sees a newer generation written by a concurrent request
        latest, marks = await _read(store, ledger)
        if latest is not None and _in_force(latest, marks):
            if latest.mark("done") not in marks and await _abandoned(latest, result_exists):
                await store.record_effect(ledger.partition, latest.mark("failed"), ledger.kind,
                                          {ledger.result_field: latest.result_id})
                continue
            return _replay(latest, request_fingerprint)
        generation = str(int(latest.generation) + 1 if latest is not None else 0)
        record, created = await _create_generation(
            store, ledger, ledger.prefix + generation,
            {"fingerprint": request_fingerprint, ledger.result_field: new_result_id},
        )
        claimed = Claim(ledger, record, first=created)
        if created:
            return claimed
        if claimed.mark("failed") not in marks:
            return _replay(claimed, request_fingerprint)
    raise _busy(ledger, "Concurrent requests keep changing this key's ledger.")


async def _create_generation(
    store: SessionStore, ledger: Ledger, key: str, payload: dict[str, Any]
) -> tuple[EffectRecord, bool]:
    """Create the generation `key` if absent: (the entry, whether this request created it). A create whose answer
    was lost after it landed (a timeout, a 503 from a gateway after the write) would leave the key claimed by no
    one: this request and its retries told "not done yet" until the claim is old enough to be given up
    (`ABANDONED_AFTER`). The entry names the request's own new result id, which no other request has, so one read
    tells whether it is this request's: then it is, as if the answer had come."""
    try:
        return await store.record_effect(ledger.partition, key, ledger.kind, payload)
    except StoreUnavailableError as failed:
        try:
            landed = await store.get_effect(ledger.partition, key)
        except StoreUnavailableError:
            landed = None
        if landed is None or landed.payload.get(ledger.result_field) != payload[ledger.result_field]:
            raise failed
        return landed, True


async def _read(store: SessionStore, ledger: Ledger) -> tuple[Claim | None, Marks]:
    """The key's latest generation, whatever its state, and all its ledger's entries by key."""
    entries = await store.list_effects(ledger.partition, kind=ledger.kind)
    generations = [e for e in entries if ledger.generation_of(e) is not None]
    latest = max(generations, key=lambda e: int(ledger.generation_of(e) or 0), default=None)
    return (Claim(ledger, latest, first=False) if latest is not None else None), {e.key: e for e in entries}


def _in_force(claim: Claim, marks: Marks) -> bool:
    """Not given up, nor past its window: the generation answers for its key."""
    if claim.mark("failed") in marks:
        return False
    created_at, window = claim.entry.created_at, claim.ledger.window
    return window is None or (created_at is not None and datetime.now(UTC) - created_at < window)


async def _abandoned(claim: Claim, result_exists: ResultCheck) -> bool:
    """A generation whose request died before making its result (checked only once it is old enough to tell)."""
    return outlived(claim) and not await result_exists(claim)


def outlived(claim: Claim) -> bool:
    """The claim is old enough that the request that made it is over, whatever became of it (`ABANDONED_AFTER`)."""
    created_at = claim.entry.created_at
    return created_at is not None and datetime.now(UTC) - created_at >= ABANDONED_AFTER


async def take_over(store: SessionStore, claim: Claim) -> bool:
    """Whether this request takes over the unfinished work of an outlived claim's request: of concurrent requests
    exactly one does (the store's conditional create of the claim's `.taken_over` mark), and only ever one."""
    _, created = await store.record_effect(claim.partition, claim.mark("taken_over"), claim.ledger.kind,
                                           {claim.ledger.result_field: claim.result_id})
    return created


async def latest_claim(store: SessionStore, ledger: Ledger) -> tuple[Claim, Marks] | None:
    """The key's generation in force, if any (read only: none is created or given up), and its ledger's entries."""
    latest, marks = await _read(store, ledger)
    return (latest, marks) if latest is not None and _in_force(latest, marks) else None


def _busy(ledger: Ledger, detail: str) -> ApiProblem:
    return ApiProblem(
        409, "idempotency_key_busy", f"The first request with this key is still {ledger.making}",
        f"{detail} Retry in a moment.", headers={"Retry-After": "1"},
    )


def _replay(claim: Claim, request_fingerprint: str) -> Claim:
    if claim.entry.payload.get("fingerprint") != request_fingerprint:
        raise ApiProblem(
            422, "idempotency_key_reused", "Idempotency-Key reused with another request", claim.ledger.reused,
            field="header.Idempotency-Key",
        )
    return claim


async def release(store: SessionStore, claim: Claim) -> None:
    """The first request failed before making its result: mark the generation failed so the key can be used again."""
    if claim.first:
        await store.record_effect(claim.partition, claim.mark("failed"), claim.ledger.kind,
                                  {claim.ledger.result_field: claim.result_id})


async def settle(store: SessionStore, claim: Claim, payload: dict[str, Any]) -> None:
    """The first request made its result: note `payload` (what a replay answers with) as the generation's `.done`."""
    await store.record_effect(claim.partition, claim.mark("done"), claim.ledger.kind, payload)


async def made_result(
    store: SessionStore, claim: Claim, find: Callable[[Marks], Awaitable[ResultT | None]],
    wait_seconds: float = REPLAY_WAIT_SECONDS,
) -> ResultT:
    """The result a replayed request answers with, once the first request has made it (it may still be doing so):
    what `find` finds, given the ledger's entries by key each time it looks."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_seconds
    delay = 0.01
    while True:
        _, marks = await _read(store, claim.ledger)
        if (found := await find(marks)) is not None:
            return found
        if claim.mark("failed") in marks:
            raise _busy(claim.ledger, "The first request with this key failed before it was done.")
        if loop.time() > deadline:
            raise _busy(claim.ledger, "The first request with this key is not done yet.")
        await asyncio.sleep(delay)  # the first request is done within milliseconds; there is no event to await
        delay = min(delay * 2, 0.25)


async def started_run(store: SessionStore, claim: Claim) -> RunRecord:
    """The run a replayed start answers with, once the first request has created it. A record the store closed in
    place of a start that never stored its run is none (`stored_run`): the first request failed, even when its key's
    release failed too (until `_run_exists` gives the claim up, a retry is told to wait, never handed that record)."""
    if (run := await stored_run(store, claim.result_id)) is not None:
        return run  # the usual replay, its run long made: no read of the ledger (`made_result` reads it each look)

    async def find(_marks: Marks) -> RunRecord | None:
        return await stored_run(store, claim.result_id)

    return await made_result(store, claim, find)
