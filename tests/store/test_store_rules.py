"""The pure rules both stores share, and record validation: recovery paths that are hard to reach through I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from session_store import MessageRecord, RunRecord, SessionBusyError, SessionRecord, rules
from session_store.cursor import decode, encode
from session_store.errors import InvalidContinuationError

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def _session(**changes: object) -> SessionRecord:
    return SessionRecord(session_id="s", agent="a", created_at=NOW, updated_at=NOW, **changes)


def test_a_retried_begin_after_the_claim_was_written_creates_the_run_without_counting_it_twice() -> None:
    claimed = _session(active_run_id="r1", run_count=3)
    claim = rules.claim_session(claimed, RunRecord(run_id="r1", session_id="s", agent="a"), NOW)
    assert claim.session is None, "the session already names this run: nothing to write"
    assert claim.run.ordinal == 3


def test_claim_increments_the_count_and_refuses_a_busy_session() -> None:
    claim = rules.claim_session(_session(run_count=1), RunRecord(run_id="r2", session_id="s", agent="a"), NOW)
    assert (claim.session.active_run_id, claim.session.run_count, claim.run.ordinal) == ("r2", 2, 2)
    with pytest.raises(SessionBusyError) as caught:
        rules.claim_session(claim.session, RunRecord(run_id="r3", session_id="s", agent="a"), NOW)
    assert caught.value.active_run_id == "r2"


def test_release_only_the_run_that_holds_the_session() -> None:
    assert rules.release_session(_session(active_run_id="r1"), "r0", NOW) is None
    assert rules.release_session(_session(active_run_id="r1"), "r1", NOW).active_run_id is None


@pytest.mark.parametrize("bad_id", ["", "a/b", "a\\b", "a?b", "a#b", "x" * 256])
def test_ids_that_cosmos_cannot_store_are_rejected_on_construction(bad_id: str) -> None:
    with pytest.raises(ValidationError):
        MessageRecord(session_id=bad_id, message_id="m", seq=0, role="user", payload={})


def test_batch_must_target_one_session_and_not_reuse_a_seq() -> None:
    a = MessageRecord(session_id="s", message_id="m1", seq=0, role="user", payload={})
    with pytest.raises(ValueError):
        rules.check_batch("other", [a])
    with pytest.raises(rules.ConflictError):
        rules.check_batch("s", [a, a.model_copy(update={"message_id": "m2"})])
    rules.check_batch("s", [a, a])  # the same message twice is a duplicate delivery, not a conflict


def test_continuation_tokens_are_bound_to_their_query() -> None:
    token = encode("scope-a", {"after": 5})
    assert decode("scope-a", token) == {"after": 5}
    for scope, bad in (("scope-b", token), ("scope-a", token[:-3]), ("scope-a", "!!!")):
        with pytest.raises(InvalidContinuationError):
            decode(scope, bad)


def test_a_decision_with_a_naive_timestamp_is_refused_not_stored() -> None:
    from session_store import ApprovalRecord

    pending = ApprovalRecord(approval_id="a", run_id="r", session_id="s", call_id="c", tool="t", created_at=NOW)
    with pytest.raises(ValidationError):
        rules.decide(pending, "approved", "alice", None, None, datetime(2026, 3, 1))
    assert rules.decide(pending, "rejected", "alice", "no", None, NOW).status == "rejected"


def test_an_unwritten_starts_record_outlives_any_write_of_its_run_still_on_its_way() -> None:
    """The record refuses a late write of its run only while it exists: its expiry must come after the longest a
    request or activity that began the run can still be writing (the host's `functionTimeout`) and after an
    `Idempotency-Key` gives up the claim of a request that died (`ABANDONED_AFTER`)."""
    import json
    from pathlib import Path

    from http_api.idempotency import ABANDONED_AFTER

    host = json.loads((Path(__file__).parents[2] / "host.json").read_text())
    hours, minutes, seconds = host["functionTimeout"].split(":")
    function_timeout = timedelta(hours=int(hours), minutes=int(minutes), seconds=int(seconds))
    longest_write = max(function_timeout, ABANDONED_AFTER, rules.UNWRITTEN_HOLDER_AFTER)
    assert 10 * longest_write <= rules.UNWRITTEN_START_KEPT
    closed = rules.closed_start(RunRecord(run_id="r", session_id="s", agent="a"), datetime.now(UTC))
    assert rules.retention_seconds(closed, None) == rules.UNWRITTEN_START_KEPT.total_seconds()
    assert rules.retention_seconds(closed, 60) == 60
    assert rules.retention_seconds(RunRecord(run_id="r", session_id="s", agent="a", status="failed"), None) is None
