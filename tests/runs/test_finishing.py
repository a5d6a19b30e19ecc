"""`agent_runs.finishing.closed_before`: a retried closing model call reads how the run was closed from its record."""

from __future__ import annotations

import pytest

from agent_runs.finishing import closed_before
from agent_runtime.run_result import error_of
from session_store import RunRecord


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        ("failed", "model_http_400: the request was refused"),
        ("failed", "invalid_structured_output: the answer does not match the output type (x: field required)"),
        ("failed", "max_iterations"),
        ("failed", "the model kept failing"),
        ("cancelled", "cancelled"),
        ("cancelled", "the user stopped it"),
    ],
)
def test_a_failed_or_cancelled_close_reads_back_as_the_reason_it_was_closed_with(status: str, reason: str) -> None:
    record = RunRecord(run_id="r", session_id="s", agent="a", status=status, error=error_of(status, reason))
    closed = closed_before(record)
    assert closed is not None and closed.turn is None
    assert (closed.finished.status, closed.finished.reason) == (status, reason)
    assert closed.finish is not None and (closed.finish.status, closed.finish.reason) == (status, reason)


def test_a_completed_close_reads_back_with_its_finish_reason_and_usage() -> None:
    record = RunRecord(
        run_id="r", session_id="s", agent="a", status="completed",
        output={"text": "Done.", "finish_reason": "budget_exceeded"}, usage={"total_tokens": 42},
    )
    closed = closed_before(record)
    assert closed is not None
    assert (closed.finished.status, closed.finished.reason) == ("completed", "budget_exceeded")
    assert closed.finish is not None and closed.finish.usage.total_tokens == 42


@pytest.mark.parametrize("status", ["in_progress", "requires_action", "queued"])
def test_an_open_run_was_not_closed_before(status: str) -> None:
    assert closed_before(RunRecord(run_id="r", session_id="s", agent="a", status=status)) is None
    assert closed_before(None) is None
