"""The activities of an agent run, by name: what their payloads look like in history is the durable format."""

from __future__ import annotations

from typing import Any

from activities.approvals import apply_decisions, escalate_approvals, expire_approvals, record_approvals
from activities.finish import finish_run
from activities.mcp import discover_tools
from activities.model import call_model
from activities.queue import take_turn
from activities.run_middleware import run_middleware_before
from activities.tools import invoke_tool
from durable_steps.activity import Activity

ACTIVITIES: dict[str, Activity[Any, Any]] = {
    a.name: a
    for a in (call_model, invoke_tool, finish_run, record_approvals, apply_decisions, expire_approvals,
              escalate_approvals, discover_tools, run_middleware_before, take_turn)
}
