"""At a run's start: keep its own webhook (if any) in its session, and say whether the run notifies at all."""

from __future__ import annotations

from agent_runtime.settings_snapshot import current_settings
from notifications import outbox
from notifications.settings import NotificationSettings
from session_store import RunRecord, SessionStore


async def prepare_notifications(store: SessionStore, run: RunRecord, webhook: str | None) -> bool:
    """True when the run has somewhere to send its events (the orchestrator then records them)."""
    settings = current_settings(NotificationSettings)
    if webhook is not None:
        await outbox.save_run_webhook(store, run.session_id, run.run_id, webhook)
    return settings.any_channel() or (webhook is not None and settings.webhook_secret is not None)
