"""`Idempotency-Key` on `POST .../runs`: the same key and body from the same principal within 24 h start one run.

The key's ledger lives in the store's effect ledger, in a partition of its own per (principal, key) (ids hashed, so
no caller-chosen text becomes a partition key; the partition's prefix is reserved, so no client-supplied session id
can name it: `http_api/reserved_ids.py`). Each use of the key is a *generation* entry created with the store's
conditional create: of 20 concurrent starts exactly one creates it and starts the run; the others read it and answer
with that run, as a poll would. A start that fails before its run exists marks its generation failed, so the key can
be retried; after 24 h the next use opens a new generation. A start that died before its run existed without marking
its generation (its process ended, or the store failed the mark too) leaves a generation with no run: once it is
`ABANDONED_AFTER` old, the next use marks it failed itself, so the key is not stuck "busy" for the rest of the 24 h.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import azure.functions as func

from http_api.identity import Principal
from http_api.problems import ApiProblem
from http_api.reserved_ids import IDEMPOTENCY_PARTITION_PREFIX
from session_store import EffectRecord, SessionStore

HEADER = "Idempotency-Key"
KIND = "idempotency"
WINDOW = timedelta(hours=24)
MAX_KEY_LENGTH = 255
REPLAY_WAIT_SECONDS = 15.0
# A start creates its run within milliseconds of claiming the key, and no HTTP request outlives Azure's 230 s front-end
# timeout by much: a generation this old without its run belongs to a start that died in between.
ABANDONED_AFTER = timedelta(minutes=5)


@dataclass(frozen=True)
class StartClaim:
    """`first`: this request starts `run_id`; otherwise it answers with `run_id`, which another request started."""

    run_id: str
    first: bool
    partition: str = ""
    generation: str = ""


def key_of(req: func.HttpRequest) -> str | None:
    key = req.headers.get(HEADER)
    if key is None:
        return None
    if not key.strip() or len(key) > MAX_KEY_LENGTH or not key.isprintable():
        raise ApiProblem(
            422, "invalid_idempotency_key", "Invalid Idempotency-Key",
            f"An Idempotency-Key is 1-{MAX_KEY_LENGTH} printable characters.", field="header.Idempotency-Key",
        )
    return key


def fingerprint(route: str, body: dict[str, Any]) -> str:
    """What "the same request" means: the route and the body (without `wait_seconds`, which only shapes the answer)."""
    data = {k: v for k, v in body.items() if k != "wait_seconds"}
    canonical = json.dumps({"route": route, "body": data}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _partition(caller: Principal, key: str) -> str:
    return IDEMPOTENCY_PARTITION_PREFIX + hashlib.sha256(f"{caller.id}\n{key}".encode()).hexdigest()[:48]


def _reused(key: str) -> ApiProblem:
    return ApiProblem(
        422, "idempotency_key_reused", "Idempotency-Key reused with another request",
        "This key started a run with a different body in the last 24 hours; use a new key for a new request.",
        field="header.Idempotency-Key",
    )


async def claim(
    store: SessionStore, caller: Principal, key: str, request_fingerprint: str, new_run_id: str
) -> StartClaim:
    partition = _partition(caller, key)
    for _ in range(5):  # each round either decides or sees a newer generation written by a concurrent request
        entries = await store.list_effects(partition, kind=KIND)
        generations = [e for e in entries if "." not in e.key]
        latest = max(generations, key=lambda e: int(e.key), default=None)
        failed = {e.key.split(".", 1)[0] for e in entries if e.key.endswith(".failed")}
        now = datetime.now(UTC)
        if latest is not None and latest.key not in failed and latest.created_at and now - latest.created_at < WINDOW:
            if await _abandoned(store, latest, now):
                await store.record_effect(partition, f"{latest.key}.failed", KIND, {"run_id": latest.payload["run_id"]})
                continue
            return _replay(latest, partition, key, request_fingerprint)
        generation = str(int(latest.key) + 1 if latest is not None else 0)
        record, created = await store.record_effect(
            partition, generation, KIND, {"fingerprint": request_fingerprint, "run_id": new_run_id}
        )
        if created:
            return StartClaim(run_id=new_run_id, first=True, partition=partition, generation=generation)
        if record.key not in failed:
            return _replay(record, partition, key, request_fingerprint)
    raise _busy("Concurrent requests keep changing this key's ledger.")


async def _abandoned(store: SessionStore, entry: EffectRecord, now: datetime) -> bool:
    """A generation whose start died before creating its run (checked only once it is old enough to tell)."""
    if entry.created_at is None or now - entry.created_at < ABANDONED_AFTER:
        return False
    return await store.get_run(str(entry.payload["run_id"])) is None


def _busy(detail: str) -> ApiProblem:
    return ApiProblem(
        409, "idempotency_key_busy", "The first request with this key is still starting its run",
        f"{detail} Retry in a moment.", headers={"Retry-After": "1"},
    )


def _replay(entry: EffectRecord, partition: str, key: str, request_fingerprint: str) -> StartClaim:
    if entry.payload.get("fingerprint") != request_fingerprint:
        raise _reused(key)
    return StartClaim(run_id=str(entry.payload["run_id"]), first=False, partition=partition, generation=entry.key)


async def release(store: SessionStore, start: StartClaim) -> None:
    """The first request failed before its run existed: mark the generation failed so the key can be used again."""
    if start.first:
        await store.record_effect(start.partition, f"{start.generation}.failed", KIND, {"run_id": start.run_id})


async def started_run(store: SessionStore, start: StartClaim) -> Any:
    """The run a replayed request answers with, once the first request has created it (it may still be doing so)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + REPLAY_WAIT_SECONDS
    delay = 0.01
    while True:
        run = await store.get_run(start.run_id)
        if run is not None:
            return run
        marks = await store.list_effects(start.partition, kind=KIND)
        if any(e.key == f"{start.generation}.failed" for e in marks):
            raise _busy("The first request with this key failed before its run began.")
        if loop.time() > deadline:
            raise _busy("The first request with this key has not created its run yet.")
        await asyncio.sleep(delay)  # the first request writes the run within milliseconds; there is no event to await
        delay = min(delay * 2, 0.25)
