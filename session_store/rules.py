"""The decisions both stores share, as pure functions over records (no I/O).

Each store reads the current records, asks these functions what the new records are (or which error applies), and
writes them back under an ETag/transaction condition. Keeping the rules here is what makes the SQLite and Cosmos
stores behave the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .errors import (
    AlreadyDecidedError,
    ConflictError,
    RunNotReopenableError,
    SessionBusyError,
    SessionMovedOnError,
    StoreError,
)
from .records import (
    REOPENABLE_RUN_STATUS,
    RUN_UPDATABLE_FIELDS,
    TERMINAL_RUN_STATUSES,
    ApprovalRecord,
    DecidedApprovalStatus,
    JsonObject,
    QueuePosition,
    RunRecord,
    SessionRecord,
)


@dataclass(frozen=True)
class RunClaim:
    """What ``begin_run`` must write: the claimed session and, unless it already exists, the new run."""

    session: SessionRecord | None  # None: the session already names this run (a retried begin_run)
    run: RunRecord


def new_session(session: SessionRecord, now: datetime) -> SessionRecord:
    """A session as first stored (``begin_run(new_session=...)``): the caller's fields, no runs yet."""
    return session.model_copy(
        update={"created_at": now, "updated_at": now, "active_run_id": None, "run_count": 0, "queued_run_ids": [],
                "etag": None}
    )


def claim_session(
    session: SessionRecord,
    run: RunRecord,
    now: datetime,
    queue: QueuePosition | None = None,
    after_run_count: int | None = None,
) -> RunClaim:
    """Make ``run`` the session's active run; if another run holds it, queue ``run`` (at the back, or at the front
    for an interrupt) when ``queue`` says so, else raise ``SessionBusyError``. A queued run has ordinal 0 until
    ``take_turn`` gives it the session's next position (so runs keep their order in the conversation).
    ``after_run_count``: the run must directly follow the session's run of that ordinal, as the caller read it
    (``SessionMovedOnError`` once another run began, active or finished)."""
    if session.active_run_id == run.run_id:
        # A retry after the claim was written but before the run was: the ordinal is already counted.
        return RunClaim(session=None, run=_new_run(run, session.run_count, now))
    if after_run_count is not None and session.run_count != after_run_count:
        raise SessionMovedOnError(session.session_id, session.run_count)
    if session.active_run_id is not None:
        if queue is None:
            raise SessionBusyError(session.session_id, session.active_run_id)
        queued = _new_run(run, 0, now).model_copy(update={"status": "queued"})
        if run.run_id in session.queued_run_ids:
            return RunClaim(session=None, run=queued)
        order = session.queued_run_ids
        order = [run.run_id, *order] if queue == "front" else [*order, run.run_id]
        return RunClaim(session=session.model_copy(update={"queued_run_ids": order, "updated_at": now}), run=queued)
    ordinal = session.run_count + 1
    claimed = session.model_copy(update={"active_run_id": run.run_id, "run_count": ordinal, "updated_at": now})
    return RunClaim(session=claimed, run=_new_run(run, ordinal, now))


def _new_run(run: RunRecord, ordinal: int, now: datetime) -> RunRecord:
    """The run as stored by a claim: a run that holds its session is `in_progress` (lists filter on it)."""
    status = "in_progress" if run.status == "queued" else run.status
    return run.model_copy(
        update={"ordinal": ordinal, "status": status, "created_at": run.created_at or now, "updated_at": now,
                "etag": None}
    )


def release_session(session: SessionRecord, run_id: str, now: datetime) -> SessionRecord | None:
    """The session without ``run_id``: an ending active run hands the session to the first queued run; an ending
    queued run leaves the queue. ``None`` if ``run_id`` is neither (nothing to write)."""
    if session.active_run_id == run_id:
        queue = session.queued_run_ids
        return session.model_copy(
            update={"active_run_id": queue[0] if queue else None, "queued_run_ids": queue[1:], "updated_at": now}
        )
    if run_id in session.queued_run_ids:
        queue = [queued for queued in session.queued_run_ids if queued != run_id]
        return session.model_copy(update={"queued_run_ids": queue, "updated_at": now})
    return None


# A store that claims the session and writes the run in two operations (Cosmos) can be stopped between them. A holder
# (active run) whose record does not exist this long after the session's last change is taken for such a start: it
# is closed in its place (`unwritten_start`) and released. Younger, it is taken for a start whose run write is still
# on its way (a few milliseconds, or the client's retries), so concurrent starts keep being told that one is busy.
UNWRITTEN_HOLDER_AFTER = timedelta(seconds=60)
START_INTERRUPTED = "start_interrupted"


def unwritten_holder_may_be_closed(session: SessionRecord, now: datetime) -> bool:
    """Whether the session's holder, found without a record, is old enough to be closed (`UNWRITTEN_HOLDER_AFTER`)."""
    return session.updated_at is None or now - session.updated_at >= UNWRITTEN_HOLDER_AFTER


def unwritten_start(session: SessionRecord, run_id: str, now: datetime) -> RunRecord:
    """The record written in place of a run whose start claimed (or queued in) the session but never wrote the run:
    failed, so that it releases the session, and created if absent, so that of it and the run's own late write exactly
    one lands (the start whose write comes second finds it and is told so, not started)."""
    return closed_start(
        RunRecord(run_id=run_id, session_id=session.session_id, agent=session.agent, owner_id=session.owner_id,
                  owner_name=session.owner_name),
        now,
    )


def closed_start(planned: RunRecord, now: datetime) -> RunRecord:
    """`unwritten_start` for the run `planned` (the record a start meant to write): what `close_unwritten_start`
    writes when the start itself, its write failed, finds no run (`run_lifecycle.create_and_start`)."""
    return RunRecord(
        run_id=planned.run_id, session_id=planned.session_id, agent=planned.agent, status="failed", created_at=now,
        updated_at=now, owner_id=planned.owner_id, owner_name=planned.owner_name,
        error={"code": START_INTERRUPTED,
               "message": "The run's start was interrupted before the run was stored; nothing of it ran."},
    )


def release_unwritten_start(
    session: SessionRecord, holder: str, now: datetime, *, counted_run_written: bool
) -> SessionRecord | None:
    """`release_session` for a holder closed in place of its start (`unwritten_start`), which is no run: the
    position its claim counted is given back, so `run_count` counts the runs that were written - as on a store that
    writes the claim and the run in one transaction (SQLite), where such a start leaves nothing - and a caller's
    `after_run_count` is not told the session moved on for a run that never existed. `counted_run_written`: a run
    of the session's `run_count` exists, so the holder did not count it (it was handed the session from the queue,
    and queued runs take their position only with their turn)."""
    released = release_session(session, holder, now)
    if released is None or session.active_run_id != holder or counted_run_written or session.run_count == 0:
        return released
    return released.model_copy(update={"run_count": session.run_count - 1})


def is_unwritten_start(run: RunRecord) -> bool:
    """A record written by `unwritten_start` (no run was ever stored under its id by its own start)."""
    return run.status == "failed" and run.ordinal == 0 and (run.error or {}).get("code") == START_INTERRUPTED


# How long the record of an unwritten start is kept. It only has to outlive any write of its run still on its way: a
# request or activity that began the run ends within the host's `functionTimeout` (10 minutes, host.json), and an
# `Idempotency-Key` gives up a claim whose run it cannot find 5 minutes on (`http_api.idempotency.ABANDONED_AFTER`).
# A day is far past both; after it, the record expires (Cosmos: the item's `ttl`; SQLite: `expires_at`, swept).
UNWRITTEN_START_KEPT = timedelta(days=1)


def retention_seconds(run: RunRecord, ttl_seconds: int | None) -> int | None:
    """How long the store keeps `run` (None: forever): the store's retention, shorter for an unwritten start's
    record, which is no run and would otherwise outlive even the session it was closed in (a failed fork's copy)."""
    if not is_unwritten_start(run):
        return ttl_seconds
    kept = int(UNWRITTEN_START_KEPT.total_seconds())
    return kept if ttl_seconds is None else min(ttl_seconds, kept)


@dataclass(frozen=True)
class Turn:
    """What ``take_turn`` must write: the run with its position (``None``: unchanged) and the session's count
    (``None``: unchanged). ``granted`` says whether the run holds the session now."""

    granted: bool
    run: RunRecord | None = None
    session: SessionRecord | None = None


def take_turn(session: SessionRecord, run: RunRecord, now: datetime) -> Turn:
    """A queued run that the session was handed to gets the next ordinal (idempotent: a run that has one keeps it,
    and the session's count is brought up to it, in case an earlier attempt wrote the run but not the session)."""
    if session.active_run_id != run.run_id:
        return Turn(granted=False)
    if run.ordinal > 0:
        behind = session.run_count < run.ordinal
        return Turn(granted=True, session=session.model_copy(update={"run_count": run.ordinal}) if behind else None)
    ordinal = session.run_count + 1
    return Turn(
        granted=True,
        run=run.model_copy(update={"ordinal": ordinal, "status": "in_progress", "updated_at": now}),
        session=session.model_copy(update={"run_count": ordinal, "updated_at": now}),
    )


def apply_run_changes(run: RunRecord, changes: dict[str, Any], now: datetime) -> RunRecord:
    """A validated copy of ``run`` with ``changes``; unknown or immutable fields raise ``ValueError``."""
    unknown = set(changes) - RUN_UPDATABLE_FIELDS
    if unknown:
        raise ValueError(f"update_run cannot change {sorted(unknown)}; allowed: {sorted(RUN_UPDATABLE_FIELDS)}")
    data = run.model_dump()
    data.update(changes, updated_at=now)
    return RunRecord.model_validate(data)


def record_tools(
    run: RunRecord,
    tools: list[JsonObject],
    now: datetime,
    skipped: list[JsonObject] | None = None,
    skipped_servers: list[JsonObject] | None = None,
) -> RunRecord | None:
    """The run with its discovered tools (and the tools and servers left out, ``skipped``, ``skipped_servers``), or
    ``None`` if it has them already (the first list wins: a retried discovery that saw a different list must not
    change what the run's earlier steps used)."""
    if run.discovered_tools is not None:
        return None
    data = run.model_dump()
    data.update(
        discovered_tools=list(tools),
        skipped_tools=list(skipped or []),
        skipped_servers=list(skipped_servers or []),
        updated_at=now,
    )
    return RunRecord.model_validate(data)


def finish(
    run: RunRecord,
    status: str,
    output: JsonObject | None,
    error: JsonObject | None,
    usage: JsonObject | None,
    now: datetime,
) -> RunRecord | None:
    """The finished run, or ``None`` if it already finished (the first finish wins; retries change nothing).

    A run whose cancel was flagged ends ``cancelled``, whatever it was to end with: the flag is written under the
    run's ETag and only while it is open, and this is decided on the record as written, so a cancel the API accepted
    (202) is how the run ends, not whichever of the cancel event and the step in flight (a final answer, a failure,
    an approval's timeout; a workflow's last step or a failed step) reached the orchestration first. The usage
    stays. The closing step reads back how the run ended (`close_run`, `workflow_finish`) and reports that."""
    if status not in TERMINAL_RUN_STATUSES:
        raise ValueError(f"finish_run needs a terminal status {sorted(TERMINAL_RUN_STATUSES)}, got {status!r}")
    if run.finished:
        return None
    flagged = run.flagged_cancel_error
    if flagged is not None and status != "cancelled":
        status, output, error = "cancelled", None, flagged
    changes: dict[str, Any] = {"status": status, "output": output, "error": error}
    if usage is not None:
        changes["usage"] = usage
    return apply_run_changes(run, changes, now)


@dataclass(frozen=True)
class Reopen:
    """What ``reopen_run`` must write (``None``: unchanged; both ``None`` for a retried reopen). With ``refused``, the
    run opened by an interrupted reopen cannot hold its session any more: ``run`` is it failed again, to write before
    raising ``refused``."""

    session: SessionRecord | None
    run: RunRecord | None
    refused: StoreError | None = None


def reopen(
    session: SessionRecord, run: RunRecord, rewind: JsonObject, now: datetime, after_rewinds: int | None = None
) -> Reopen:
    """A failed run made its session's active run again (a rewind goes on with it): only the session's latest run,
    and only while nothing else holds or waits for the session. A store that cannot write both at once opens the run
    first, then claims the session: repeating it with the same ``rewind_id`` (a retry after a crash in between)
    claims the session, or, when a new run took it meanwhile, fails the run again. Another rewind of a run that is
    already open again loses, and so does one whose caller read fewer rewinds than ``after_rewinds`` finds (another
    rewind came first and failed again: the loser's resume point is of the failure before)."""
    rewind_id = rewind.get("rewind_id")
    if not run.finished and run.rewinds and run.rewinds[-1].get("rewind_id") == rewind_id:
        if session.active_run_id == run.run_id:
            return Reopen(session=None, run=None)
        refused = _reopen_refusal(session, run)
        if refused is not None:
            return Reopen(session=None, run=_failed_again(run, now), refused=refused)
        return Reopen(session=_held_by(session, run, now), run=None)
    if run.status != REOPENABLE_RUN_STATUS:
        raise RunNotReopenableError(run.run_id, "not_failed", f"it is {run.status}, not failed")
    if after_rewinds is not None and len(run.rewinds) != after_rewinds:
        raise RunNotReopenableError(run.run_id, "not_failed", "another rewind of it came first")
    refused = _reopen_refusal(session, run)
    if refused is not None:
        raise refused
    # A cancel requested before the failure (or one that came too late, told 409) does not outlive it: the rewind is
    # the newer request, and every step of the reopened run would otherwise read the old flag and cancel it.
    opened = apply_run_changes(
        run,
        {"status": "in_progress", "output": None, "error": None, "cancel_requested_at": None, "cancel_reason": None},
        now,
    )
    opened = opened.model_copy(update={"rewinds": [*run.rewinds, rewind]})
    return Reopen(session=_held_by(session, run, now), run=opened)


def _held_by(session: SessionRecord, run: RunRecord, now: datetime) -> SessionRecord:
    return session.model_copy(update={"active_run_id": run.run_id, "updated_at": now})


def _reopen_refusal(session: SessionRecord, run: RunRecord) -> StoreError | None:
    if run.ordinal != session.run_count or session.queued_run_ids:
        return RunNotReopenableError(run.run_id, "not_latest", "later runs of its session came after it")
    if session.active_run_id not in (None, run.run_id):
        return SessionBusyError(session.session_id, session.active_run_id)
    return None


def _failed_again(run: RunRecord, now: datetime) -> RunRecord:
    """A run whose rewind opened it but never went on (its session moved on first): failed as before, without that
    rewind. Its error's message is gone with the reopen; the code of the failure is kept in the rewind."""
    code = str(run.rewinds[-1].get("error_code") or "failed")
    error = {"code": code, "message": "The run failed; a rewind of it was interrupted before it went on."}
    failed = apply_run_changes(run, {"status": "failed", "error": error}, now)
    return failed.model_copy(update={"rewinds": run.rewinds[:-1]})


def escalate(
    approval: ApprovalRecord, to: str, expires_at: datetime, escalated_at: datetime, to_keys: Sequence[str] = ()
) -> ApprovalRecord:
    """The approval, still pending, now waiting for `to` until `expires_at`; ``AlreadyDecidedError`` if it is not
    pending any more. Escalating again to the same `to` (a retried step) changes nothing.

    `to` becomes one of its approvers (and `to_keys`, the inbox keys `to` is found by, join its ``decider_keys``):
    an escalation that only named `to` left the approval to the approvers who had let it time out, while `to` got a
    404 and an empty inbox. Those approvers keep their say; separation of duties still applies."""
    if approval.status != "pending":
        raise AlreadyDecidedError(approval)
    if approval.escalated_to == to:
        return approval
    return ApprovalRecord.model_validate(
        {
            **approval.model_dump(),
            "escalated_to": to,
            "escalated_at": escalated_at,
            "expires_at": expires_at,
            "approvers": _joined(approval.approvers, [to]),
            "decider_keys": _joined(approval.decider_keys, to_keys),
        }
    )


def _joined(entries: Sequence[str], more: Sequence[str]) -> list[str]:
    return list(dict.fromkeys([*entries, *more]))


def decide(
    approval: ApprovalRecord,
    status: DecidedApprovalStatus,
    decided_by: str | None,
    reason: str | None,
    edited_arguments: JsonObject | None,
    decided_at: datetime,
    decided_by_name: str | None = None,
) -> ApprovalRecord:
    """The decided approval, or ``AlreadyDecidedError`` if it is not pending any more."""
    if approval.status != "pending":
        raise AlreadyDecidedError(approval)
    if status not in ("approved", "rejected", "expired"):
        raise ValueError(f"an approval is decided as approved, rejected or expired, not {status!r}")
    # Validated (not model_copy) because these values come from the caller: e.g. a naive ``decided_at`` must fail
    # here rather than be stored and break every later read.
    return ApprovalRecord.model_validate(
        {
            **approval.model_dump(),
            "status": status,
            "decided_by": decided_by,
            "decided_by_name": decided_by_name,
            "reason": reason,
            "edited_arguments": edited_arguments,
            "decided_at": decided_at,
        }
    )


def seq_conflict(session_id: str, seq: int, existing_id: str, new_id: str) -> ConflictError:
    return ConflictError(
        f"session {session_id!r}: seq {seq} already belongs to message {existing_id!r}, cannot store {new_id!r}"
    )


def check_batch(session_id: str, records: list[Any]) -> None:
    """A message batch must target its session and must not give one seq to two different messages."""
    seen: dict[int, str] = {}
    for record in records:
        if record.session_id != session_id:
            raise ValueError(f"message {record.message_id!r} belongs to {record.session_id!r}, not {session_id!r}")
        other = seen.setdefault(record.seq, record.message_id)
        if other != record.message_id:
            raise seq_conflict(session_id, record.seq, other, record.message_id)
