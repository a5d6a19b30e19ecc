"""Every activity of the `workflow` orchestrator, in one place: `function_app.py` registers them from this tuple,
and the workflow driver asks for them by these objects (never by name)."""

from __future__ import annotations

from typing import Any

from activities.workflow_agents import (
    workflow_cancel_children,
    workflow_flag_children_cancelled,
    workflow_record_agents,
    workflow_start_agents,
)
from activities.workflow_finish import workflow_closed_before, workflow_finish
from activities.workflow_gates import workflow_expire_gate, workflow_open_gate, workflow_record_gate
from activities.workflow_steps import (
    workflow_call_function,
    workflow_evaluate,
    workflow_find_signal,
    workflow_record_delay,
    workflow_record_signal,
    workflow_resolve_time,
)
from durable_steps import Activity

WORKFLOW_ACTIVITIES: tuple[Activity[Any, Any], ...] = (
    workflow_start_agents,
    workflow_record_agents,
    workflow_flag_children_cancelled,
    workflow_cancel_children,
    workflow_call_function,
    workflow_evaluate,
    workflow_resolve_time,
    workflow_record_delay,
    workflow_record_signal,
    workflow_find_signal,
    workflow_open_gate,
    workflow_expire_gate,
    workflow_record_gate,
    workflow_finish,
    workflow_closed_before,
)
