"""A run's cancel flag (`agent_runs.run_status.flag_cancel`), on both stores: written under the ETag of the run as
the request read it; a run changed since is read again, and flagged only while it is open and unflagged. Once
flagged, the run ends `cancelled` however its finish was asked (`rules.finish`): the flag is the cancel."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from store_helpers import new_session, run

from agent_runs.run_status import flag_cancel
from session_store import SessionStore


async def test_a_second_cancel_from_a_stale_read_keeps_the_first_time(store: SessionStore) -> None:
    session_id = await new_session(store)
    read = await store.begin_run(run(session_id))
    first = datetime.now(UTC)
    await flag_cancel(store, read, first)
    await flag_cancel(store, read, first + timedelta(seconds=1))  # read before the first flag landed
    flagged = await store.get_run(read.run_id)
    assert flagged is not None and flagged.cancel_requested_at == first


async def test_a_run_changed_since_it_was_read_is_flagged_on_its_fresh_state(store: SessionStore) -> None:
    session_id = await new_session(store)
    read = await store.begin_run(run(session_id))
    await store.update_run(read.run_id, metadata={"changed": True})
    now = datetime.now(UTC)
    await flag_cancel(store, read, now)
    flagged = await store.get_run(read.run_id)
    assert flagged is not None and (flagged.cancel_requested_at, flagged.metadata) == (now, {"changed": True})


async def test_a_run_that_finished_since_it_was_read_is_not_flagged(store: SessionStore) -> None:
    session_id = await new_session(store)
    read = await store.begin_run(run(session_id))
    await store.finish_run(read.run_id, "completed", output={"text": "done"})
    too_late = await flag_cancel(store, read, datetime.now(UTC))
    finished = await store.get_run(read.run_id)
    assert finished is not None and (finished.status, finished.cancel_requested_at) == ("completed", None)
    assert too_late is not None and too_late.status == "completed"  # the caller learns it came too late


@pytest.mark.parametrize(("status", "output", "error"), [
    ("completed", {"text": "The answer.", "finish_reason": "stop"}, None),
    ("failed", None, {"code": "approval_timeout", "message": "approval_timeout"}),
])
async def test_a_flagged_run_ends_cancelled_whatever_its_finish_asked(
    store: SessionStore, status: str, output: dict | None, error: dict | None
) -> None:
    session_id = await new_session(store)
    read = await store.begin_run(run(session_id))
    assert await flag_cancel(store, read, datetime.now(UTC)) is None  # flagged
    usage = {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}
    stored = await store.finish_run(read.run_id, status, output=output, error=error, usage=usage, current=read)
    assert (stored.status, stored.output, stored.error) == (
        "cancelled", None, {"code": "cancelled", "message": "cancelled by the client"}
    )
    assert stored.usage == usage  # what the run was billed is kept
    again = await store.finish_run(read.run_id, "completed", output=output)  # a retried close changes nothing
    assert (again.status, again.etag) == ("cancelled", stored.etag)
    session = await store.get_session(session_id)
    assert session is not None and session.active_run_id is None  # the session is free


async def test_a_flagged_run_ends_with_its_cancels_reason(store: SessionStore) -> None:
    """The reason the flag was written with (an interrupting start's, a workflow's) is the error's message, as the
    cancel event would have made it."""
    session_id = await new_session(store)
    read = await store.begin_run(run(session_id))
    await flag_cancel(store, read, datetime.now(UTC), reason="interrupted by a new run")
    stored = await store.finish_run(read.run_id, "completed", output={"text": "The answer."})
    assert (stored.status, stored.error) == ("cancelled", {"code": "cancelled", "message": "interrupted by a new run"})


async def test_a_flagged_workflow_run_ends_cancelled_whatever_its_last_step_decided(store: SessionStore) -> None:
    """A workflow's last step that completed or failed after its cancel was flagged: the record ends `cancelled`
    (`workflow_finish` reads that back and the orchestration reports it)."""
    session_id = await new_session(store)
    for asked, output, error in (
        ("completed", {"result": 1}, None),
        ("failed", None, {"code": "step_failed", "message": "step 'f' failed: boom", "step": "f"}),
    ):
        read = await store.begin_run(run(session_id).model_copy(update={"kind": "workflow", "agent": "wf"}))
        await flag_cancel(store, read, datetime.now(UTC))
        stored = await store.finish_run(read.run_id, asked, output=output, error=error)
        assert (stored.status, stored.output) == ("cancelled", None)
        assert stored.error == {"code": "cancelled", "message": "cancelled by the client"}


async def test_a_workflow_closed_as_asked_reads_back_what_it_asked(store: SessionStore) -> None:
    """`workflow_finish` tells "closed otherwise" from the returned record's status and error: a close as asked must
    read back equal on both stores (a failed step's error with its `step`, or without one)."""
    session_id = await new_session(store)
    for error in (
        {"code": "step_failed", "message": "step 'f' failed: boom", "step": "f"},
        {"code": "payload_too_large", "message": "its data outgrew the budget", "step": None},
    ):
        read = await store.begin_run(run(session_id).model_copy(update={"kind": "workflow", "agent": "wf"}))
        stored = await store.finish_run(read.run_id, "failed", error=error, current=read)
        assert (stored.status, stored.error) == ("failed", error)


async def test_a_flagged_run_cancelled_keeps_its_own_cancel_error(store: SessionStore) -> None:
    session_id = await new_session(store)
    read = await store.begin_run(run(session_id))
    await flag_cancel(store, read, datetime.now(UTC))
    terminated = {"code": "run_terminated", "message": "The run was terminated before it finished."}
    stored = await store.finish_run(read.run_id, "cancelled", error=terminated)
    assert (stored.status, stored.error) == ("cancelled", terminated)
