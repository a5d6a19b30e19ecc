"""The notes of recordings given up (`notifications.hooks`), on every backend: one per given-up call, and the end's
note ends the run's delivery only for that end (a rewound run ends again)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from store_helpers import new_session, run
from test_store_reopen import rewind

from notifications import outbox
from notifications.activities import idle
from notifications.contracts import DeliveryInput
from notifications.events import run_event
from notifications.subscriptions import Subscription
from session_store import SessionStore

SINCE = datetime(2030, 1, 1, tzinfo=UTC)


async def test_each_given_up_recording_of_a_run_without_position_is_noted(store: SessionStore) -> None:
    """A run without a position (`seq` None) gives two approvals' recordings up, days apart: both are in its log."""
    session_id = await new_session(store)
    started = await store.begin_run(run(session_id))
    for since in (SINCE, SINCE + timedelta(days=4)):
        for _ in range(2):  # the activity retried: noted once
            await outbox.note_given_up(store, session_id, started.run_id, None,
                                       outbox.GivenUp(what="approvals", failing_since=since))
    noted = await outbox.given_up(store, session_id, started.run_id)
    assert sorted(n.failing_since for n in noted) == [SINCE, SINCE + timedelta(days=4)]


async def test_a_given_up_end_does_not_end_the_delivery_of_the_rewound_run_s_next_end(store: SessionStore) -> None:
    """The run failed and its end's recording was given up: its idle delivery may end. Rewound, the run ends again;
    until that end's event is recorded (it is marked ended first) its delivery must wait for it, not end on the
    note of the end before (it would miss the wake-up that comes with the new end's event)."""
    session_id = await new_session(store)
    run_id = (await store.begin_run(run(session_id))).run_id
    failed = await store.finish_run(run_id, "failed", error={"code": "model_call_failed", "message": "down"})
    first_end = run_event(failed, base_url="")
    assert first_end is not None
    await outbox.note_given_up(store, session_id, run_id, None, outbox.GivenUp(
        what="finished", failing_since=SINCE, event_id=first_end.id))
    webhook = Subscription(key="wh-1", kind="webhook", url="https://example.com/hook", events=[])
    step = DeliveryInput(run_id=run_id, session_id=session_id, subscription=webhook.key)
    assert (await idle(store, step, webhook, [])).final

    await store.reopen_run(run_id, rewind("r1"))
    completed = await store.finish_run(run_id, "completed", output={"text": "done"})
    waiting = await idle(store, step, webhook, [])
    assert not waiting.final and waiting.end_missing  # looked at again hourly, ended once nothing can record it
    second_end = run_event(completed, base_url="")
    assert second_end is not None and second_end.id != first_end.id
    await outbox.note_given_up(store, session_id, run_id, None, outbox.GivenUp(
        what="finished", failing_since=SINCE + timedelta(days=5), event_id=second_end.id))
    assert (await idle(store, step, webhook, [])).final  # that end given up too: nothing more can come


async def test_a_recording_given_up_for_the_run_s_cancel_is_noted_with_why(store: SessionStore) -> None:
    """A cancel won a failing recording's wait: noted as such (`why`), beside a note of days of failing; a note
    written before `why` was kept reads as the days of failing it was."""
    session_id = await new_session(store)
    run_id = (await store.begin_run(run(session_id))).run_id
    await store.record_effect(session_id, f"notify-given-up:{run_id}:approvals:1:{SINCE.isoformat()}",
                              outbox.GIVEN_UP, {"run_id": run_id, "what": "approvals",
                                                "failing_since": SINCE.isoformat(), "event_id": None})
    later = SINCE + timedelta(days=4)
    await outbox.note_given_up(store, session_id, run_id, 2, outbox.GivenUp(
        what="approvals", failing_since=later, why="cancelled"))
    noted = sorted(await outbox.given_up(store, session_id, run_id), key=lambda n: n.failing_since)
    assert [(n.what, n.failing_since, n.why) for n in noted] == [
        ("approvals", SINCE, "failing"), ("approvals", later, "cancelled")]
