"""When a view may use the run record read earlier in the request (`run_views.record_still_current`): never once the
orchestration says the record moved on (finished, or given its place in the queue), so a poll never shows a stale
status, output or range of updates. Operation counts: `tests/load/test_store_operation_budgets.py`."""

from __future__ import annotations

import asyncio

import pytest

from agent_runs.contracts import RunProgress
from agent_runs.sequence import run_seq_range
from agent_runtime.continuation import ContinuationTokens
from http_api.durable_gateway import JUST_CREATED, OrchestrationState
from http_api.identity import Principal
from http_api.run_views import TOKEN_SCOPE, build_run_view, record_still_current
from session_store import MessageRecord, RunRecord
from session_store.records import Page

RUNNING = RunRecord(run_id="r1", session_id="s1", agent="a", status="in_progress", ordinal=1)
FIRST, _ = run_seq_range(1)
TOKENS = ContinuationTokens(["test-secret-0123456789"])
OWNER = Principal(id="anonymous", auth_type="none")


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



class MessageReadCounter:
    """Stands in for the store where a view of a running run reads: its messages (no approval is waited for and no
    draft is in flight here, so nothing else is read)."""

    def __init__(self) -> None:
        self.message_reads = 0

    async def list_messages(self, *args: object, **kwargs: object) -> Page[MessageRecord]:
        self.message_reads += 1
        return Page(items=[], continuation=None)


def progress_at(visible_seq: int) -> OrchestrationState[RunProgress]:
    return OrchestrationState("Running", RunProgress(status="in_progress", visible_seq=visible_seq), None)


@pytest.mark.parametrize(
    ("orchestration", "updates", "reads"),
    [
        (JUST_CREATED, 2, 0),  # the answer to a start without wait: before the first step only the input exists
        (state("Running", None), 2, 0),  # the same, read back
        (progress_at(FIRST), 1, 0),  # steps made visible up to the first input message
        (progress_at(FIRST + 1), 2, 0),
        (progress_at(FIRST + 5), 0, 1),  # past the input: read from the store
    ],
)
def test_a_start_shows_the_input_it_stored_without_reading_it_back(
    orchestration: OrchestrationState[RunProgress], updates: int, reads: int
) -> None:
    store = MessageReadCounter()
    known = [
        MessageRecord(session_id="s1", message_id=f"in-{i}", seq=FIRST + i, run_id="r1", role="user",
                      payload={"role": "user", "contents": [{"type": "text", "text": f"m{i}"}]})
        for i in range(2)
    ]
    view = asyncio.run(build_run_view(store, TOKENS, RUNNING, orchestration, cursor=None,  # type: ignore[arg-type]
                                      base_url="http://app.test", viewer=OWNER, known=known))
    assert [u.seq for u in view.updates] == [record.seq for record in known[:updates]]
    assert store.message_reads == reads
    assert view.continuation_token is not None
    cursor = TOKENS.verify(view.continuation_token, TOKEN_SCOPE, "r1")["seq"]
    assert cursor == (known[updates - 1].seq if updates else FIRST - 1)  # the next poll goes on right after
