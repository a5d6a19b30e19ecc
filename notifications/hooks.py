"""The run orchestrators' one call after a transition: `yield from notify(context, ...)`. Only runs that started
with notifications configured make it (their input says so), so other runs' histories are unchanged; a failure is
ignored, so notifications never fail a run."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Literal

import azure.durable_functions as df

from notifications.activities import notify_run
from notifications.contracts import NotifyInput


def notify(
    context: df.DurableOrchestrationContext,
    enabled: bool,
    *,
    run_id: str,
    session_id: str,
    agent: str,
    what: Literal["approvals", "finished"],
    seq: int | None = None,
) -> Generator[Any, Any, None]:
    """`seq`: the run's position (deterministic, never smaller than at an earlier call): the order of its events."""
    if not enabled:
        return
    try:
        yield notify_run.call(context, NotifyInput(run_id=run_id, session_id=session_id, agent=agent, what=what,
                                                   seq=seq))
    except Exception:  # a run never fails for a notification; its events are recorded by the next call
        return
