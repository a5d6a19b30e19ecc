"""Typed store errors.

A missing item is never an error on reads (``get_*`` returns ``None``); these exceptions describe the cases a caller
must handle differently: a busy session, a decision that lost the race, an item that cannot be stored, a write that
names something that does not exist, and a backend that cannot be reached. No SDK exception leaks out of a store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .records import ApprovalRecord


class StoreError(Exception):
    """Base class of every error a ``SessionStore`` raises on purpose."""


class NotFoundError(StoreError):
    """A write (not a read) named an item that does not exist, e.g. ``update_run`` of an unknown run."""

    def __init__(self, kind: str, key: str) -> None:
        super().__init__(f"{kind} {key!r} does not exist")
        self.kind = kind
        self.key = key


class SessionBusyError(StoreError):
    """``begin_run`` on a session that already has another active run (one active run per session)."""

    def __init__(self, session_id: str, active_run_id: str) -> None:
        super().__init__(f"session {session_id!r} already has an active run {active_run_id!r}")
        self.session_id = session_id
        self.active_run_id = active_run_id


class SessionMovedOnError(StoreError):
    """``begin_run(after_run_count=n)`` on a session that has had more than ``n`` runs: another run began after the
    caller read the session, so the new run would follow one the caller never saw."""

    def __init__(self, session_id: str, run_count: int) -> None:
        super().__init__(f"session {session_id!r} has had {run_count} runs since it was read")
        self.session_id = session_id
        self.run_count = run_count


class AlreadyDecidedError(StoreError):
    """``decide_approval`` lost: the approval is no longer pending. ``current`` is the stored record."""

    def __init__(self, current: ApprovalRecord) -> None:
        super().__init__(f"approval {current.approval_id!r} is already {current.status}")
        self.current = current


class ItemTooLargeError(StoreError):
    """An item is over the per-item size limit (Cosmos: 2 MB); rejected before anything is sent or written."""

    def __init__(self, kind: str, key: str, size: int, limit: int) -> None:
        super().__init__(
            f"{kind} {key!r} is {size:,} bytes serialized; the limit is {limit:,} bytes per item "
            "(store large tool results elsewhere and keep a reference in the message)"
        )
        self.kind = kind
        self.key = key
        self.size = size
        self.limit = limit


class RunNotReopenableError(StoreError):
    """``reopen_run`` of a run that is not failed (``reason="not_failed"``: e.g. another rewind won) or not its
    session's latest run (``reason="not_latest"``: later runs built on its failure)."""

    def __init__(self, run_id: str, reason: str, detail: str) -> None:
        super().__init__(f"run {run_id!r} cannot be reopened: {detail}")
        self.run_id = run_id
        self.reason = reason


class ConflictError(StoreError):
    """A write violates a uniqueness rule, e.g. two different message ids with the same ``seq`` in one session."""


class StoreUnavailableError(StoreError):
    """The backend cannot be reached or refused the request (auth, missing permissions, network, exhausted retries)."""


class InvalidContinuationError(StoreError, ValueError):
    """A continuation token that this store did not issue for this query (tampered, truncated or foreign)."""
