"""When a view may use the run record read earlier in the request (`run_views.record_still_current`): never once the
orchestration says the record moved on (finished, or given its place in the queue), so a poll never shows a stale
status, output or range of updates. Operation counts: `tests/load/test_store_operation_budgets.py`."""

from __future__ import annotations

import pytest

from agent_runs.contracts import RunProgress
from http_api.durable_gateway import OrchestrationState
from http_api.run_views import record_still_current
from session_store import RunRecord

RUNNING = RunRecord(run_id="r1", session_id="s1", agent="a", status="in_progress", ordinal=1)


def state(runtime: str, status: str | None = "in_progress") -> OrchestrationState[RunProgress]:
    progress = None if status is None else RunProgress(status=status, visible_seq=1)  # type: ignore[arg-type]
    return OrchestrationState(runtime, progress, None)


@pytest.mark.parametrize(
    ("record", "orchestration", "current"),
    [
        (RUNNING, state("Running"), True),  # a running run: the view takes its status and updates from the state
        (RUNNING, state("Running", "requires_action"), True),
        (RUNNING, state("Running", None), True),  # started, no progress published yet
        (RUNNING, state("Running", "completed"), False),  # the progress says it finished: its output is stored
        (RUNNING, state("Completed"), False),
        (RUNNING, state("Failed"), False),  # crashed: reconciled from a fresh record
        (RUNNING, state("Terminated"), False),
        (RUNNING, None, False),  # no orchestration (yet, or any more): read again
        (RUNNING.model_copy(update={"ordinal": 0, "status": "queued"}), state("Running"), False),  # queued: ordinal
        (RUNNING.model_copy(update={"status": "completed"}), state("Completed"), True),  # finished records never change
    ],
)
def test_a_view_reads_the_run_again_only_when_the_orchestration_says_it_moved_on(
    record: RunRecord, orchestration: OrchestrationState[RunProgress] | None, current: bool
) -> None:
    assert record_still_current(record, orchestration) is current
