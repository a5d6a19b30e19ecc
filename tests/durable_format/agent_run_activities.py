"""The activities of an agent run, by name: what their payloads look like in history is the durable format."""

from __future__ import annotations

from typing import Any

from activities.agent_run_steps import AGENT_RUN_ACTIVITIES
from durable_steps.activity import Activity

ACTIVITIES: dict[str, Activity[Any, Any]] = {a.name: a for a in AGENT_RUN_ACTIVITIES}
