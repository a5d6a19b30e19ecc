"""Every activity of an agent run (`orchestrators.agent_run` and its queue wait), as the Functions app registers them:
one tuple, so the app and the orchestrators cannot disagree on what exists."""

from __future__ import annotations

from typing import Any

from activities.approvals import apply_decisions, escalate_approvals, expire_approvals, record_approvals
from activities.finish import finish_run
from activities.mcp import discover_tools
from activities.model import call_model
from activities.queue import take_turn
from activities.run_middleware import run_middleware_before
from activities.tools import invoke_tool
from activities.workflow_rings import ring_workflow
from durable_steps import Activity

AGENT_RUN_ACTIVITIES: tuple[Activity[Any, Any], ...] = (
    take_turn,
    run_middleware_before,
    discover_tools,
    call_model,
    invoke_tool,
    record_approvals,
    apply_decisions,
    expire_approvals,
    escalate_approvals,
    finish_run,
    ring_workflow,
)
