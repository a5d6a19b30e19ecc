"""What a client sees of a run: its status, the updates since its cursor, pending approvals, output, next token.

The store is the source of truth for content and for finished runs; the orchestration's custom status
(`RunProgress`) says how far a running run has got (`visible_seq`: everything written by completed steps), so a
poll never shows half of a step and each update is delivered exactly once, in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from agent_runs.client_errors import client_message
from agent_runs.closing import close_if_crashed
from agent_runs.sequence import run_seq_range
from agent_runtime.continuation import ContinuationTokens
from agent_runtime.messages import Message
from http_api.durable_gateway import OrchestrationState
from http_api.identity import Principal
from http_api.models import (
    FINAL_STATUSES,
    PendingApproval,
    RunError,
    RunLinks,
    RunStatus,
    RunUpdate,
    RunView,
    SkippedServer,
    SkippedTool,
    Usage,
)
from http_api.token_binding import bound_to
from session_store import ApprovalRecord, MessageRecord, RunRecord, SessionStore

UPDATES_PER_RESPONSE = 200
# Up to this many approvals the run waits for are point-read (1 RU each); more are one query.
APPROVAL_POINT_READS = 10
_MOVING = ("Pending", "Running", "Suspended", "ContinuedAsNew")
TOKEN_SCOPE = "run"
async def reconcile(store: SessionStore, run: RunRecord, state: OrchestrationState[Any] | None) -> RunRecord:
    """A run whose orchestration ended without closing it (crash, terminate) is closed now (`close_if_crashed`)."""
    if state is None:
        return run
    return await close_if_crashed(store, run, state.runtime_status, state.output)


def _status(run: RunRecord, state: OrchestrationState | None) -> RunStatus:
    if run.finished:
        return run.status
    if state is not None and state.progress is not None:
        return state.progress.status
    return "queued"


def _visible_seq(run: RunRecord, state: OrchestrationState | None) -> int:
    _, last = run_seq_range(run.ordinal)
    if run.finished or state is None or state.progress is None:
        # Finished: everything. Not started yet: only the input exists, so everything is still right.
        return last
    return state.progress.visible_seq


def record_still_current(run: RunRecord, state: OrchestrationState | None) -> bool:
    """Whether `run`, read before `state`, still holds what a view takes from the record. A finished record changes
    again only when a rewind reopens it, and the rewind then starts the orchestration again: a state that moves says
    so. An unfinished one changes in what a view shows only when the run finishes (its output, usage and
    error) or gets its place in a queue (its ordinal), and the orchestration's state, read later, announces both: its
    runtime status ends or its progress says final, or the run has an ordinal only once it runs. Everything else a
    view shows of a running run comes from that state. So a view needs no second read of the record unless the state
    says the record moved on."""
    if run.finished:
        return state is None or state.runtime_status not in _MOVING
    if run.ordinal == 0 or state is None or state.runtime_status not in _MOVING:
        return False
    return state.progress is None or state.progress.status not in FINAL_STATUSES


async def waiting_approvals(
    store: SessionStore, run: RunRecord, state: OrchestrationState | None
) -> list[ApprovalRecord]:
    """The approval records the run waits for, as its orchestration state names them (none once it finished): read
    by id in the run's session, so a poll pays a point read per approval rather than a query."""
    ids = [] if run.finished or state is None or state.progress is None else list(state.progress.pending_approvals)
    if not ids:
        return []
    if len(ids) > APPROVAL_POINT_READS:
        return [r for r in await store.list_approvals(run_id=run.run_id, session_id=run.session_id)
                if r.approval_id in ids]
    found = [await store.get_approval(i, session_id=run.session_id) for i in ids]  # usually one
    return [record for record in found if record is not None and record.run_id == run.run_id]


def links(base_url: str, run: RunRecord) -> RunLinks:
    return RunLinks(
        self=f"{base_url}/api/runs/{run.run_id}",
        cancel=f"{base_url}/api/runs/{run.run_id}/cancel",
        approvals=f"{base_url}/api/runs/{run.run_id}/approvals",
        session=f"{base_url}/api/sessions/{run.session_id}",
    )


async def build_run_view(
    store: SessionStore,
    tokens: ContinuationTokens,
    run: RunRecord,
    state: OrchestrationState | None,
    *,
    cursor: int | None,
    base_url: str,
    viewer: Principal,
    waiting: Sequence[ApprovalRecord] | None = None,
    known: Sequence[MessageRecord] = (),
) -> RunView:
    """The view of `run` (read before `state`) given the orchestration `state` (`DurableGateway.state`). `waiting`:
    the caller's `waiting_approvals` for this state, if it read them already. `known`: messages at the start of
    the run's range as the caller itself stored them (its input), every one of them: updates within them are not
    read back. `viewer`: who the view is for (the run's owner), told what they may do with each pending approval."""
    if not record_still_current(run, state):
        # Re-read the run after the orchestration: a run the custom status calls finished has its output stored by
        # then, and a queued one its ordinal.
        run = await store.get_run(run.run_id, session_id=run.session_id) or run
    run = await reconcile(store, run, state)
    status = _status(run, state)
    first, _ = run_seq_range(run.ordinal)
    after = max(cursor if cursor is not None else first - 1, first - 1)
    visible = _visible_seq(run, state)
    records: list[MessageRecord] = []
    more = False
    if after < visible:  # a caught-up cursor has nothing to read: completed steps wrote up to `visible` only
        from_known = _known_updates(known, first, after, visible, before_first_step=_before_first_step(run, state))
        if from_known is not None:
            records = from_known
        else:
            page = await store.list_messages(
                run.session_id, after_seq=after, up_to_seq=visible, limit=UPDATES_PER_RESPONSE
            )
            records, more = page.items, page.continuation is not None
    updates = [RunUpdate(seq=record.seq, message=message_view(record)) for record in records]
    new_cursor = updates[-1].seq if updates else after
    if run.finished:
        waiting = []
    elif waiting is None:
        waiting = await waiting_approvals(store, run, state)
    pending = [a for a in waiting if a.status == "pending"]
    token = None
    if status not in FINAL_STATUSES or more:
        token = tokens.issue(TOKEN_SCOPE, run.run_id, {"seq": new_cursor, **bound_to(run.owner_id)})
    return RunView(
        run_id=run.run_id,
        session_id=run.session_id,
        agent=run.agent,
        status=status,
        created_at=run.created_at,
        updated_at=run.updated_at,
        updates=updates,
        pending_approvals=[PendingApproval.of(a, run, viewer, now=datetime.now(UTC)) for a in pending],
        usage=_usage(run, state),
        output=run.output,
        finish_reason=(run.output or {}).get("finish_reason") if run.status == "completed" else None,
        partial_output=None if run.finished else await partial_output(store, run, state),
        error=_client_error(run.error),
        rewinds=run.rewinds,
        skipped_tools=[SkippedTool.model_validate(skipped) for skipped in run.skipped_tools],
        skipped_servers=[SkippedServer.model_validate(skipped) for skipped in run.skipped_servers],
        continuation_token=token,
        links=links(base_url, run),
    )


def _before_first_step(run: RunRecord, state: OrchestrationState | None) -> bool:
    """Whether the run has not begun a step: its orchestration exists but published no progress yet (every step
    publishes before it is scheduled, `orchestrators.agent_run._step`), so its range holds only its input."""
    return not run.finished and state is not None and state.progress is None


def _known_updates(
    known: Sequence[MessageRecord], first: int, after: int, visible: int, *, before_first_step: bool
) -> list[MessageRecord] | None:
    """The updates in (`after`, `visible`] taken from `known` (the run's input as the caller stored it: consecutive
    seqs from the run's first), or None when they must be read. Before the run's first step the input is all its
    range holds; after it, `known` must reach `visible`."""
    seqs = [record.seq for record in known]
    if not seqs or seqs != list(range(first, first + len(seqs))) or after + 1 < first:
        return None
    end = min(visible, seqs[-1]) if before_first_step else visible
    if end > seqs[-1] or end - after > UPDATES_PER_RESPONSE:
        return None
    return [record for record in known if after < record.seq <= end]


def message_view(record: MessageRecord) -> dict[str, Any]:
    """A stored message as clients see it, with the time it was stored (a run's timeline is built from these)."""
    if record.created_at is None or "created_at" in record.payload:
        return record.payload
    return {**record.payload, "created_at": record.created_at.isoformat().replace("+00:00", "Z")}


def _client_error(error: dict[str, Any] | None) -> RunError | None:
    if not error:
        return None
    code = str(error.get("code") or "failed")
    return RunError(code=code, message=client_message(code, str(error.get("message") or "")))


def _usage(run: RunRecord, state: OrchestrationState | None) -> Usage:
    source: dict[str, Any] = run.usage if run.finished else {}
    if not run.finished and state is not None and state.progress is not None:
        source = state.progress.usage.model_dump()
    return Usage.model_validate(source or {})


async def partial_output(store: SessionStore, run: RunRecord, state: OrchestrationState | None) -> str | None:
    """The draft of the model answer streaming in (see `agent_runs.drafts`), if a model call is in flight."""
    seq = state.progress.model_call_seq if state is not None and state.progress is not None else None
    if seq is None:
        return None
    page = await store.list_messages(run.session_id, after_seq=seq - 1, up_to_seq=seq, limit=1)
    return Message.model_validate(page.items[0].payload).text if page.items else None


# Shared with the other views of a run (the OpenAI Responses surface) so every surface reads a run the same way.
run_status = _status
visible_seq = _visible_seq
run_usage = _usage
