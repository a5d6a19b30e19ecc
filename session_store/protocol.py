"""The ``SessionStore`` protocol: what the durable agent runs persist, whatever the backend.

Capabilities (every method is async; records are the pydantic models of ``records.py``):

Sessions
    ``create_session`` is idempotent (an existing session is returned unchanged, owner included); ``get_session``
    returns ``None`` when missing; ``list_sessions`` pages newest first, optionally for one agent and/or one owner
    (``owner_id``); ``delete_session`` removes the
    session and everything in it (messages, runs, approvals, effects) and says whether it existed.
Messages
    One item per message, ordered by the caller-assigned ``seq`` (unique per session). ``append_messages`` upserts by
    ``message_id``: a retried activity writing the same ids never duplicates anything; a *different* id reusing a
    ``seq`` raises ``ConflictError``. The whole batch is size-checked before anything is written
    (``ItemTooLargeError``). ``list_messages`` pages by an opaque continuation token; ``count_messages`` and
    ``last_seq`` help the run layer compute the next ``seq``.
Runs
    ``begin_run`` atomically makes the run the session's only active run and assigns ``ordinal = run_count + 1``;
    another active run raises ``SessionBusyError``, unless ``queue`` is given: then the run is stored ``queued``
    (ordinal 0) in the session's queue (at the back, or the front). Repeating it with the same ``run_id`` returns the
    stored run. When the active run finishes the session passes to the first queued run, which ``take_turn`` then
    gives its ordinal (``None`` while it is still waiting).
    ``get_run`` resolves a run from its id alone (no cross-partition query); a caller that knows the run's session
    passes ``session_id`` (one read fewer on Cosmos; a run of another session is then ``None``). ``update_run``
    changes the mutable fields under an ETag (optionally the caller's ``if_match``). ``finish_run`` sets a terminal
    status (the first finish wins) and releases the session if this run holds it. ``record_run_tools`` stores the
    tools discovered for a run once (with those left out): the first list wins and is returned to every later caller.
    ``list_owner_runs`` pages one owner's runs newest first (optionally by status and agent). ``list_branch_runs``
    returns, newest first (at most ``limit``), one owner's runs whose ``branched_from`` is the given response id (a
    retry of a Responses create that branched looks for its first attempt's branch; never on a hot path).
    ``reopen_run`` makes a failed run, the latest of its session, its session's active run again with ``rewind``
    appended to its ``rewinds`` (``rules.reopen``); the same ``rewind_id`` again completes an interrupted reopen (or,
    when a new run took the session meanwhile, fails the run again and raises). ``after_rewinds``: the run must have
    that many rewinds, as the caller read it (``RunNotReopenableError`` ``not_failed`` once another rewind came first,
    even one that failed again since: the caller's resume point is of the earlier failure).
Approvals
    ``put_approvals`` creates requests if absent (a retried write never resets a decision); ``get_approval`` resolves
    from the id alone (or, like ``get_run``, with the ``session_id`` the caller knows); ``decide_approval`` is
    conditional: exactly one decision wins, the others get ``AlreadyDecidedError`` carrying the stored record.
    ``list_decidable_approvals`` pages, newest first, the approvals whose ``decider_keys`` contain any of ``keys``
    (an approver's inbox; across sessions).
Records in hand
    ``update_run``, ``finish_run`` and ``decide_approval`` take the caller's ``current`` record (read earlier, with its
    ETag): Cosmos starts from it instead of reading again. It cannot make them act on stale data: the write is
    conditioned on that ETag, and a record that changed meanwhile is read again and decided afresh.
Effects
    ``record_effect`` is create-if-absent by idempotency key and says whether this call created it.
Signals
    ``append_signal`` appends a signal to the queue of its ``(session, name)`` with the next ``index`` (1, 2, ...),
    allocated atomically: concurrent appends of one name get distinct, gapless indexes in the order they committed.
    Once per ``signal_id``: appending a ``signal_id`` that queue holds (a retry after a lost answer) returns that
    signal as stored and appends nothing.
    ``list_signals`` returns a name's signals from ``from_index`` on, in index order.
Retention
    With a TTL every item expires that many seconds after its last write and is invisible from then on.
Records returned
    Are the caller's: parsed from what is stored, or (a write) the records given with the store-managed fields set.
    A store keeps no reference to a record it was given or returned, and changes none.
Errors
    Missing items on reads are ``None``; typed errors live in ``errors.py``; no backend exception leaks out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from .records import (
    ApprovalRecord,
    ApprovalStatus,
    DecidedApprovalStatus,
    EffectRecord,
    JsonObject,
    MessageRecord,
    Page,
    QueuePosition,
    RunRecord,
    SessionRecord,
    SignalRecord,
)


@runtime_checkable
class SessionStore(Protocol):
    # Sessions
    async def create_session(
        self,
        session_id: str,
        agent: str,
        metadata: JsonObject | None = None,
        *,
        owner_id: str | None = None,
        owner_name: str | None = None,
        forked_from: JsonObject | None = None,
    ) -> SessionRecord: ...

    async def get_session(self, session_id: str) -> SessionRecord | None: ...

    async def list_sessions(
        self,
        *,
        agent: str | None = None,
        owner_id: str | None = None,
        limit: int = 50,
        continuation: str | None = None,
    ) -> Page[SessionRecord]: ...

    async def delete_session(self, session_id: str) -> bool: ...

    # Messages
    async def append_messages(self, session_id: str, records: Sequence[MessageRecord]) -> list[MessageRecord]: ...

    async def append_to_open_run(
        self, session_id: str, run_id: str, records: Sequence[MessageRecord]
    ) -> tuple[RunRecord | None, list[MessageRecord] | None]:
        """`append_messages` unless the session's run `run_id` has finished. Returns the run as read (None: no such
        run; the messages are written) and the messages as stored (None: the run had finished; nothing written)."""
        ...

    async def list_messages(
        self,
        session_id: str,
        *,
        after_seq: int | None = None,
        up_to_seq: int | None = None,
        run_id: str | None = None,
        limit: int = 100,
        continuation: str | None = None,
    ) -> Page[MessageRecord]: ...

    async def get_message(self, session_id: str, message_id: str) -> MessageRecord | None:
        """One message by its id (a point read), or None."""
        ...

    async def count_messages(self, session_id: str, *, run_id: str | None = None) -> int: ...

    async def last_seq(self, session_id: str) -> int | None: ...

    # Runs
    async def begin_run(
        self,
        record: RunRecord,
        *,
        queue: QueuePosition | None = None,
        new_session: SessionRecord | None = None,
        after_run_count: int | None = None,
    ) -> RunRecord:
        """`new_session`: the run's session does not exist yet (an id the caller just made up): it is created already
        held by the run. A session of that id that this run does not hold already is `ConflictError`.
        `after_run_count`: claim the session only if it has had exactly that many runs (`SessionMovedOnError`
        otherwise: a run began since the caller read it), in the same conditional write as the claim."""
        ...

    async def close_unwritten_start(self, planned: RunRecord) -> tuple[RunRecord, bool]:
        """After a failed `begin_run` of `planned`: the run as stored, or, none stored under its id, a record that
        closes it in place of its start (`rules.closed_start`, failed), created if absent; True when that record was
        written now (provably, no run was: none of the start's writes can land any more - a late `begin_run` of it
        finds the record and claims nothing). A claim of the session that landed without its run is released."""
        ...

    async def take_turn(self, run_id: str) -> RunRecord | None: ...

    async def get_run(self, run_id: str, *, session_id: str | None = None) -> RunRecord | None: ...

    async def update_run(
        self, run_id: str, *, if_match: str | None = None, current: RunRecord | None = None, **changes: Any
    ) -> RunRecord: ...

    async def finish_run(
        self,
        run_id: str,
        status: str,
        *,
        output: JsonObject | None = None,
        error: JsonObject | None = None,
        usage: JsonObject | None = None,
        current: RunRecord | None = None,
    ) -> RunRecord: ...

    async def list_runs(self, session_id: str) -> list[RunRecord]: ...

    async def record_run_tools(
        self,
        run_id: str,
        tools: Sequence[JsonObject],
        skipped: Sequence[JsonObject] = (),
        skipped_servers: Sequence[JsonObject] = (),
    ) -> RunRecord: ...

    async def reopen_run(self, run_id: str, rewind: JsonObject, *, after_rewinds: int | None = None) -> RunRecord: ...

    async def list_owner_runs(
        self,
        owner_id: str,
        *,
        status: str | None = None,
        agent: str | None = None,
        limit: int = 50,
        continuation: str | None = None,
    ) -> Page[RunRecord]: ...

    async def list_branch_runs(self, branched_from: str, *, owner_id: str, limit: int = 10) -> list[RunRecord]:
        """`owner_id`'s runs whose `branched_from` is `branched_from`, newest first (cross-partition on Cosmos)."""
        ...

    # Approvals
    async def put_approvals(self, records: Sequence[ApprovalRecord]) -> list[ApprovalRecord]: ...

    async def get_approval(self, approval_id: str, *, session_id: str | None = None) -> ApprovalRecord | None: ...

    async def list_approvals(
        self,
        *,
        run_id: str | None = None,
        session_id: str | None = None,
        status: ApprovalStatus | None = None,
    ) -> list[ApprovalRecord]: ...

    async def list_decidable_approvals(
        self,
        keys: Sequence[str],
        *,
        status: ApprovalStatus | None = "pending",
        limit: int = 50,
        continuation: str | None = None,
    ) -> Page[ApprovalRecord]: ...

    async def decide_approval(
        self,
        approval_id: str,
        status: DecidedApprovalStatus,
        *,
        decided_by: str | None = None,
        decided_by_name: str | None = None,
        reason: str | None = None,
        edited_arguments: JsonObject | None = None,
        decided_at: datetime | None = None,
        current: ApprovalRecord | None = None,
    ) -> ApprovalRecord: ...

    async def escalate_approval(
        self,
        approval_id: str,
        to: str,
        *,
        expires_at: datetime,
        escalated_at: datetime | None = None,
        to_keys: Sequence[str] = (),
    ) -> ApprovalRecord:
        """Hand a pending approval to `to` with a new deadline (conditional like ``decide_approval``: a decided one
        raises ``AlreadyDecidedError``); idempotent for the same `to`. `to` joins the approvers and `to_keys` (the
        inbox keys `to` is found by) its ``decider_keys``, so the escalation's approver may decide it."""
        ...

    # Effects (idempotency ledger for tool side effects)
    async def record_effect(
        self, session_id: str, key: str, kind: str, payload: JsonObject
    ) -> tuple[EffectRecord, bool]: ...

    async def list_effects(self, session_id: str, *, kind: str | None = None) -> list[EffectRecord]: ...

    async def get_effect(self, session_id: str, key: str) -> EffectRecord | None:
        """The ledger entry of `key` (a point read), None if there is none."""
        ...

    # Signals (per-name queues of a workflow run's control session)
    async def append_signal(
        self, session_id: str, name: str, signal_id: str, payload: Any
    ) -> SignalRecord: ...

    async def list_signals(
        self, session_id: str, name: str, *, from_index: int = 1, limit: int = 100
    ) -> list[SignalRecord]: ...

    async def close(self) -> None: ...
