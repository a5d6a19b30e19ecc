"""The run's notification log, kept in its session (the store's effect ledger: insert-once items keyed by
deterministic ids, so a retried activity writes nothing twice): the events, each delivery attempt, what is done.

An event is recorded here before anything is sent, so a host killed between a transition and its delivery loses
nothing: the delivery orchestration reads what to send from here."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel

from notifications.events import NotificationEvent
from session_store import SessionStore

EVENT = "notify_event"
ATTEMPT = "notify_attempt"
DONE = "notify_done"
STOP = "notify_stop"
RUN_WEBHOOK = "notify_run_webhook"
GIVEN_UP = "notify_given_up"


class OutboxEntry(BaseModel):
    """One thing to deliver: an event (or a redelivery of one: a new entry with the same event, and webhook-id)."""

    entry: str
    event: NotificationEvent
    seq: int | None = None
    """The run's position when it recorded the event (`NotifyInput.seq`); none before it was kept, or a redelivery."""
    order: int = 0
    recorded_at: datetime | None = None


class Attempt(BaseModel):
    subscription: str
    run_id: str
    entry: str
    event_id: str
    type: str
    attempt: int
    at: datetime
    status: int | None = None
    outcome: str
    error: str | None = None
    retry_in_seconds: float | None = None


async def record_events(
    store: SessionStore, session_id: str, events: list[NotificationEvent], *, seq: int | None = None
) -> int:
    """Record each event once (with the run's position when it was first recorded); returns how many were new."""
    fresh = 0
    for order, event in enumerate(events):
        payload: dict[str, Any] = {"event": event.model_dump(mode="json"), "order": order}
        if seq is not None:
            payload["seq"] = seq
        _, created = await store.record_effect(session_id, f"notify-event:{event.id}", EVENT, payload)
        fresh += created
    return fresh


def is_redelivery(entry: str) -> bool:
    """A redelivery's entry (`notify-event:<event id>:<nonce>`): sent by an orchestration of its own."""
    return entry.count(":") > 1


async def record_redelivery(store: SessionStore, session_id: str, event: NotificationEvent, nonce: str) -> str:
    entry = f"notify-event:{event.id}:{nonce}"
    await store.record_effect(session_id, entry, EVENT, {"event": event.model_dump(mode="json"), "order": 0})
    return entry


async def entries(store: SessionStore, session_id: str, run_id: str) -> list[OutboxEntry]:
    """The run's entries in the order the run recorded them: by its position, then within one call; the store's
    times (the recording hosts' clocks, which may disagree) only among entries without a position (recorded before
    positions were kept: they come first) and among calls at one position. Redeliveries come last."""
    found = [
        OutboxEntry(entry=r.key, event=NotificationEvent.model_validate(r.payload["event"]), seq=r.payload.get("seq"),
                    order=int(r.payload.get("order", 0)), recorded_at=r.created_at)
        for r in await store.list_effects(session_id, kind=EVENT)
        if r.payload.get("event", {}).get("run_id") == run_id
    ]
    return sorted(found, key=_recording_order)


def _recording_order(entry: OutboxEntry) -> tuple[Any, ...]:
    epoch = datetime.min.replace(tzinfo=UTC)
    return (is_redelivery(entry.entry), entry.seq is not None, entry.seq or 0, entry.recorded_at or epoch, entry.order,
            entry.entry)


async def done_entries(store: SessionStore, session_id: str, subscription: str) -> set[str]:
    prefix = f"notify-done:{subscription}:"
    return {r.key[len(prefix):] for r in await store.list_effects(session_id, kind=DONE) if r.key.startswith(prefix)}


async def mark_done(store: SessionStore, session_id: str, subscription: str, entry: str, outcome: str) -> None:
    await store.record_effect(session_id, f"notify-done:{subscription}:{entry}", DONE, {"outcome": outcome})


async def record_attempt(store: SessionStore, session_id: str, attempt: Attempt, *, key: str | None = None) -> None:
    key = f"notify-try:{attempt.subscription}:{attempt.entry}:{key or attempt.attempt}"
    await store.record_effect(session_id, key, ATTEMPT, attempt.model_dump(mode="json"))


async def attempts(store: SessionStore, session_id: str, run_id: str) -> list[dict[str, Any]]:
    return [r.payload for r in await store.list_effects(session_id, kind=ATTEMPT) if r.payload.get("run_id") == run_id]


async def stop(store: SessionStore, session_id: str, subscription: str, run_id: str) -> None:
    await store.record_effect(session_id, f"notify-stop:{subscription}:{run_id}", STOP, {})


async def stopped(store: SessionStore, session_id: str, subscription: str, run_id: str) -> bool:
    key = f"notify-stop:{subscription}:{run_id}"
    return any(r.key == key for r in await store.list_effects(session_id, kind=STOP))


class GivenUp(BaseModel):
    """A recording of the run's events given up after days of failing, or for the run's cancel while it waited to be
    tried again: what it was to record (`approvals`: their requests, decisions, expiries; `finished`: the run's
    end), never sent."""

    what: Literal["approvals", "finished"]
    failing_since: datetime
    why: Literal["failing", "cancelled"] = "failing"
    """`failing`: for days; `cancelled`: the run was cancelled while the recording waited (notes from before: the
    former)."""
    event_id: str | None = None
    """`finished`: the id of the end's event (a rewound run ends again, under another id)."""


async def note_given_up(store: SessionStore, session_id: str, run_id: str, seq: int | None, given_up: GivenUp) -> None:
    """Once per given-up call: `failing_since` tells calls apart where `seq` cannot (None: a run without ordinal)."""
    key = f"notify-given-up:{run_id}:{given_up.what}:{seq}:{given_up.failing_since.isoformat()}"
    await store.record_effect(session_id, key, GIVEN_UP, {"run_id": run_id, **given_up.model_dump(mode="json")})


async def given_up(store: SessionStore, session_id: str, run_id: str) -> list[GivenUp]:
    return [GivenUp.model_validate(r.payload) for r in await store.list_effects(session_id, kind=GIVEN_UP)
            if r.payload.get("run_id") == run_id]


async def end_given_up(store: SessionStore, session_id: str, run_id: str, end: NotificationEvent) -> bool:
    """Whether the recording of this end's event was given up (it will never be recorded): not an end of the run
    before a rewind."""
    return any(noted.event_id == end.id for noted in await given_up(store, session_id, run_id))


async def save_run_webhook(store: SessionStore, session_id: str, run_id: str, url: str) -> None:
    await store.record_effect(session_id, f"notify-webhook:{run_id}", RUN_WEBHOOK, {"url": url})


async def run_webhook(store: SessionStore, session_id: str, run_id: str) -> str | None:
    key = f"notify-webhook:{run_id}"
    for record in await store.list_effects(session_id, kind=RUN_WEBHOOK):
        if record.key == key:
            return str(record.payload["url"])
    return None
