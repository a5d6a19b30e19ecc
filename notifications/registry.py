"""Every function of notifications the Functions app registers (one tuple, like the run's activities)."""

from __future__ import annotations

from typing import Any

from durable_steps import Activity
from notifications.activities import (
    deliver_next,
    end_unrecordable,
    give_up_next,
    note_recording_given_up,
    notify_run,
)
from notifications.orchestrator import notification_delivery
from notifications.slack_responses import send_slack_response, slack_response

NOTIFICATION_ACTIVITIES: tuple[Activity[Any, Any], ...] = (
    notify_run, deliver_next, give_up_next, note_recording_given_up, end_unrecordable, send_slack_response)
NOTIFICATION_ORCHESTRATORS = (notification_delivery, slack_response)
