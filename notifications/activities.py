"""The notification activities: `notify_run` records a run's new events (before anything is sent) and starts or wakes
one delivery orchestration per subscription; `deliver_next` sends the oldest undelivered event of one subscription
once. Neither fails a run: the run's orchestrator records a failed `notify_run` again on a durable timer until it
holds (`hooks`: given up only after days, or when the run is cancelled meanwhile), and delivery has its own
orchestration."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import azure.durable_functions as df

from agent_runs.services import RunServices
from agent_runtime.settings_snapshot import current_settings
from durable_steps import activity
from notifications import outbox
from notifications.backoff import MAX_DELAY_SECONDS, STEP_GIVE_UP_AFTER
from notifications.client_activity import client_activity
from notifications.contracts import (
    ORCHESTRATOR_NAME,
    WAKE_EVENT,
    DeliveryInput,
    DeliveryStep,
    NotifyInput,
    NotifyResult,
    RecordingGivenUp,
    delivery_instance_id,
)
from notifications.events import OPENING_TYPES, NotificationEvent, approval_event, approval_transitions, run_event
from notifications.links import page_path, sign_link
from notifications.outbox import OutboxEntry
from notifications.sender import send
from notifications.settings import NotificationSettings
from notifications.subscriptions import Subscription, subscriptions
from session_store import ApprovalRecord, SessionStore

log = logging.getLogger(__name__)
RUNNING = {"Running", "Pending", "ContinuedAsNew"}


async def run_subscriptions(store: SessionStore, session_id: str, run_id: str) -> list[Subscription]:
    return subscriptions(current_settings(NotificationSettings), await outbox.run_webhook(store, session_id, run_id))


def link_base(services: RunServices) -> str:
    """Links point at `PUBLIC_BASE_URL` (on Azure, else the app's host name); locally they are relative."""
    return services.deployment_settings.link_base or ""


def link_secrets(services: RunServices) -> list[str]:
    return services.run_settings.token_secrets(on_azure=services.deployment_settings.on_azure)


def decision_page(services: RunServices, record: ApprovalRecord, settings: NotificationSettings) -> str:
    now = datetime.now(UTC)
    longest = now + timedelta(seconds=settings.decision_link_ttl_seconds)
    expires = min(record.expires_at, longest) if record.expires_at else longest
    token = sign_link(link_secrets(services), run_id=record.run_id, approval_id=record.approval_id, expires_at=expires)
    return link_base(services) + page_path(record.approval_id, token)


async def events_of(
    services: RunServices, step: NotifyInput, settings: NotificationSettings
) -> list[NotificationEvent]:
    store = services.store
    base = link_base(services)
    if step.what == "finished":
        run = await store.get_run(step.run_id)
        event = run_event(run, base_url=base) if run is not None else None
        return [event] if event is not None else []
    events = []
    for record in await store.list_approvals(run_id=step.run_id):
        for event_type, discriminator, at in approval_transitions(record):
            page = decision_page(services, record, settings) if event_type in OPENING_TYPES else None
            events.append(approval_event(event_type, discriminator, at, record, agent=step.agent, base_url=base,
                                         page=page, include_arguments=settings.webhook_include_arguments))
    return events


async def start_or_wake(client: df.DurableOrchestrationClient, subscription: str, run_id: str, session_id: str) -> None:
    """Start the delivery orchestration of (subscription, run), or wake it if it runs (its id is deterministic, so a
    retried activity starts it once). The events are recorded before: a started orchestration reads them."""
    instance_id = delivery_instance_id(subscription, run_id)
    if await _running(client, instance_id) and await _woken(client, instance_id):
        return
    payload: dict[str, Any] = DeliveryInput(run_id=run_id, session_id=session_id,
                                            subscription=subscription).model_dump(mode="json")
    try:
        await client.start_new(ORCHESTRATOR_NAME, instance_id, payload)
    except Exception:  # started meanwhile by a concurrent step: wake it instead
        log.info("delivery %s already started", instance_id)
        await client.raise_event(instance_id, WAKE_EVENT, {})


async def _running(client: df.DurableOrchestrationClient, instance_id: str) -> bool:
    status = await client.get_status(instance_id)
    return status is not None and status.runtime_status is not None and status.runtime_status.value in RUNNING


async def _woken(client: df.DurableOrchestrationClient, instance_id: str) -> bool:
    """Wake a delivery orchestration just seen running; False if the wake-up failed: most likely it ended between
    that look and the wake-up (410)."""
    try:
        await client.raise_event(instance_id, WAKE_EVENT, {})
        return True
    except Exception:
        log.info("delivery %s not woken: ended since it was looked at?", instance_id, exc_info=True)
        return False


async def start_redelivery(
    client: df.DurableOrchestrationClient, subscription: str, *, run_id: str, session_id: str, entry: str,
    nonce: str,
) -> None:
    """A redelivery is sent by an orchestration of its own: a fresh instance, so nothing can end under it (waking the
    run's delivery orchestration could find it finished between a status check and the wake-up, and the entry would
    wait for an orchestration that no longer runs)."""
    payload = DeliveryInput(run_id=run_id, session_id=session_id, subscription=subscription,
                            entry=entry).model_dump(mode="json")
    await client.start_new(ORCHESTRATOR_NAME, delivery_instance_id(subscription, run_id, nonce), payload)


async def wake_if_running(client: df.DurableOrchestrationClient, subscription: str, run_id: str) -> None:
    """Wake the delivery orchestration of (subscription, run) if it waits, so it sees the run ended and ends too (one
    that ended meanwhile needs no wake-up)."""
    instance_id = delivery_instance_id(subscription, run_id)
    if not await _running(client, instance_id) or await _woken(client, instance_id):
        return
    # Ended since the look: nothing to wake (failing the step for it would leave the subscriptions after this one
    # unwoken until the step's retry). Still running: a real failure, the step is retried.
    if await _running(client, instance_id):
        raise RuntimeError(f"delivery {instance_id} runs but could not be woken")


@client_activity()
async def notify_run(step: NotifyInput, client: df.DurableOrchestrationClient) -> NotifyResult:
    services = RunServices.current()
    settings = current_settings(NotificationSettings)
    subs = await run_subscriptions(services.store, step.session_id, step.run_id)
    if not subs:
        return NotifyResult()
    events = [e for e in await events_of(services, step, settings) if any(s.wants(e.type) for s in subs)]
    recorded = await outbox.record_events(services.store, step.session_id, events, seq=step.seq)
    for subscription in subs:
        if any(subscription.wants(e.type) for e in events):
            await start_or_wake(client, subscription.key, step.run_id, step.session_id)
        elif step.what == "finished":  # a subscription that does not want the run's final event (Slack's)
            await wake_if_running(client, subscription.key, step.run_id)
    return NotifyResult(recorded=recorded, subscriptions=len(subs))


@client_activity()
async def note_recording_given_up(given_up: RecordingGivenUp, client: df.DurableOrchestrationClient) -> None:
    """Keep in the run's notification log that a recording was given up (`hooks`), for its clients to see: written
    only if the store takes it (the store may be what failed). The run's end given up, its deliveries are woken:
    nothing else will, and their idle check ends them on this note (`idle`)."""
    step = given_up.step
    store = RunServices.current().store
    run = await store.get_run(step.run_id) if step.what == "finished" else None
    end = run_event(run, base_url="") if run is not None else None
    await outbox.note_given_up(store, step.session_id, step.run_id, step.seq, outbox.GivenUp(
        what=step.what, failing_since=given_up.failing_since, why=given_up.why,
        event_id=end.id if end is not None else None))
    if step.what == "finished":
        for subscription in await run_subscriptions(store, step.session_id, step.run_id):
            await wake_if_running(client, subscription.key, step.run_id)


STEP_FAILED = ("the delivery step itself kept failing for days (not the receiver: the store unreachable, or a bug); "
               "given up, redeliver to send it again")


async def live_subscription(store: SessionStore, step: DeliveryInput) -> Subscription | None:
    """The step's subscription, unless it left the settings or was stopped (410) for this run."""
    by_key = {s.key: s for s in await run_subscriptions(store, step.session_id, step.run_id)}
    subscription = by_key.get(step.subscription)
    if subscription is None or await outbox.stopped(store, step.session_id, step.subscription, step.run_id):
        return None
    return subscription


async def outstanding(
    store: SessionStore, step: DeliveryInput, subscription: Subscription
) -> tuple[list[OutboxEntry], list[OutboxEntry]]:
    """The run's recorded entries, and those this orchestration has still to send, oldest first: the events the
    subscription wants, or (a redelivery's orchestration) its one entry. One read: the two agree."""
    done = await outbox.done_entries(store, step.session_id, step.subscription)
    recorded = await outbox.entries(store, step.session_id, step.run_id)
    mine = (lambda e: e == step.entry) if step.entry else (lambda e: not outbox.is_redelivery(e))
    pending = [e for e in recorded if subscription.wants(e.event.type) and e.entry not in done and mine(e.entry)]
    return recorded, pending


async def idle(
    store: SessionStore, step: DeliveryInput, subscription: Subscription, recorded: list[OutboxEntry]
) -> DeliveryStep:
    """Nothing to send. Final (the orchestration may end) once nothing more can come: the run has ended and its end's
    event, if this subscription wants it, was among what was just found sent (or its recording was given up: it will
    never be). The run is marked ended before that event is recorded: ending in between would drop the wake-up that
    comes with it. A redelivery's ends with its entry."""
    if step.entry is not None:
        return DeliveryStep(outcome="idle", final=True)
    run = await store.get_run(step.run_id)
    if run is None:
        return DeliveryStep(outcome="idle", final=True)
    end = run_event(run, base_url="") if run.finished else None
    if end is None or not subscription.wants(end.type):
        return IDLE_FINAL if run.finished else IDLE_RUNNING
    if any(e.event.id == end.id for e in recorded) or await outbox.end_given_up(store, step.session_id, step.run_id,
                                                                                  end):
        return IDLE_FINAL
    return DeliveryStep(outcome="idle", end_missing=True, recheck_in_seconds=MAX_DELAY_SECONDS)


IDLE_FINAL = DeliveryStep(outcome="idle", final=True)
# While the run runs, its recordings wake the deliveries; a look every few days finds a run whose end's recording
# was given up unnoted (the note refused too: nothing wakes them then). Once its end is missing, hourly.
IDLE_RUNNING = DeliveryStep(outcome="idle", recheck_in_seconds=STEP_GIVE_UP_AFTER.total_seconds())


@client_activity()
async def end_unrecordable(step: DeliveryInput, client: df.DurableOrchestrationClient) -> bool:
    """The run has ended without its end's event recorded (`DeliveryStep.end_missing`): can nothing record it any
    more? Only the run's orchestration records it: so once that no longer runs (its recording given up, the note of
    that refused too; or it was terminated) and, read only then, the event is still missing, the run's idle
    deliveries may end (a rewound run's next end starts them again). Read before, it may have been recorded in
    between, its wake-up lost with the delivery ending."""
    if await _running(client, step.run_id):
        return False
    found = await _next_to_send(RunServices.current().store, step)
    return isinstance(found, DeliveryStep) and found.end_missing


def is_last(step: DeliveryInput, head: OutboxEntry, pending: list[OutboxEntry]) -> bool:
    return step.entry is not None or (head.event.final and len(pending) == 1)


async def _next_to_send(
    store: SessionStore, step: DeliveryInput
) -> tuple[Subscription, list[OutboxEntry]] | DeliveryStep:
    """The live subscription and what it has still to send (non-empty, oldest first), or the step's answer when
    there is nothing to send: stop (the subscription is gone) or idle."""
    subscription = await live_subscription(store, step)
    if subscription is None:
        return DeliveryStep(outcome="stop")
    recorded, pending = await outstanding(store, step, subscription)
    if not pending:
        return await idle(store, step, subscription, recorded)
    return subscription, pending


@activity()
async def deliver_next(step: DeliveryInput) -> DeliveryStep:
    """Send the oldest event this subscription has not had yet (one attempt), and log the attempt."""
    services = RunServices.current()
    settings = current_settings(NotificationSettings)
    store = services.store
    found = await _next_to_send(store, step)
    if isinstance(found, DeliveryStep):
        return found
    subscription, pending = found
    head = pending[0]
    allow_private = settings.webhook_allow_private_addresses or not services.deployment_settings.on_azure
    result = await send(subscription, head.event, secrets=settings.webhook_secrets(), attempt=step.attempt,
                        allow_private=allow_private, allowed_hosts=settings.allowed_hosts())
    last_try = step.attempt + 1 >= settings.webhook_max_attempts
    outcome = "abandoned" if result.outcome == "retry" and last_try else result.outcome
    await outbox.record_attempt(store, step.session_id, outbox.Attempt(
        subscription=step.subscription, run_id=step.run_id, entry=head.entry, event_id=head.event.id,
        type=head.event.type, attempt=step.attempt, at=datetime.now(UTC), status=result.status,
        outcome=outcome, error=result.error,
        retry_in_seconds=result.retry_in_seconds if outcome == "retry" else None,
    ))
    if outcome == "gone":
        await outbox.stop(store, step.session_id, step.subscription, step.run_id)
        return DeliveryStep(outcome="stop")
    if outcome == "retry":
        return DeliveryStep(outcome="retry", retry_in_seconds=result.retry_in_seconds)
    await outbox.mark_done(store, step.session_id, step.subscription, head.entry, outcome)
    return DeliveryStep(outcome=outcome, final=is_last(step, head, pending))  # type: ignore[arg-type]


@activity()
async def give_up_next(step: DeliveryInput) -> DeliveryStep:
    """`deliver_next` kept failing itself for `backoff.STEP_GIVE_UP_AFTER`: give the oldest event up (`abandoned`,
    with the reason as its last attempt), kept in the log for redelivery, so the next one can go."""
    store = RunServices.current().store
    found = await _next_to_send(store, step)
    if isinstance(found, DeliveryStep):
        return found
    _, pending = found
    head = pending[0]
    await outbox.record_attempt(store, step.session_id, outbox.Attempt(
        subscription=step.subscription, run_id=step.run_id, entry=head.entry, event_id=head.event.id,
        type=head.event.type, attempt=step.attempt, at=datetime.now(UTC), outcome="abandoned", error=STEP_FAILED,
    ), key="gave-up")
    await outbox.mark_done(store, step.session_id, step.subscription, head.entry, "abandoned")
    return DeliveryStep(outcome="abandoned", final=is_last(step, head, pending))
