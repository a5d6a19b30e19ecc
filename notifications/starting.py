"""At a run's start: keep its own webhook (if any) in its session, and say whether the run notifies at all."""

from __future__ import annotations

from agent_runtime.settings_snapshot import current_settings
from notifications import outbox
from notifications.contracts import NotificationFlags
from notifications.settings import NotificationSettings
from session_store import RunRecord, SessionStore


async def prepare_notifications(store: SessionStore, run: RunRecord, webhook: str | None) -> NotificationFlags:
    """The input flags of a run (`RunInput`, `WorkflowRef`): `notify` when it has somewhere to send its events (the
    orchestrator then records them), with what every run starting now does about a recording that fails
    (`notifications.hooks`)."""
    notify = await _notifies(store, run, webhook)
    return NotificationFlags(notify=notify, notify_gives_up=notify, notify_notes_cancels=notify)


async def _notifies(store: SessionStore, run: RunRecord, webhook: str | None) -> bool:
    settings = current_settings(NotificationSettings)
    if webhook is not None:
        await outbox.save_run_webhook(store, run.session_id, run.run_id, webhook)
    return settings.any_channel() or (webhook is not None and settings.webhook_secret is not None)
