"""What a client sees of a run: its status, the updates since its cursor, pending approvals, output, next token.

The store is the source of truth for content and for finished runs; the orchestration's custom status
(`RunProgress`) says how far a running run has got (`visible_seq`: everything written by completed steps), so a
poll never shows half of a step and each update is delivered exactly once, in order.
"""

from __future__ import annotations

from typing import Any, Literal

from agent_runs.client_errors import client_message, crash_error
from agent_runs.closing import close_abandoned_run
from agent_runs.sequence import run_seq_range
from agent_runtime.continuation import ContinuationTokens
from agent_runtime.messages import Message
from http_api.durable_gateway import OrchestrationState
from http_api.models import (
    FINAL_STATUSES,
    PendingApproval,
    RunError,
    RunLinks,
    RunStatus,
    RunUpdate,
    RunView,
    Usage,
)
from http_api.token_binding import bound_to
from session_store import RunRecord, SessionStore

UPDATES_PER_RESPONSE = 200
TOKEN_SCOPE = "run"
_CRASHED: dict[str, Literal["failed", "cancelled"]] = {
    "Failed": "failed",
    "Terminated": "cancelled",
    "Canceled": "cancelled",
}


async def reconcile(store: SessionStore, run: RunRecord, state: OrchestrationState[Any] | None) -> RunRecord:
    """A run whose orchestration ended without closing it (crash, terminate) is closed now, as `finish_run` would
    have: its calls answered, its approvals expired, its session freed."""
    if run.finished or state is None or state.runtime_status not in _CRASHED:
        return run
    status = _CRASHED[state.runtime_status]
    code = "run_crashed" if status == "failed" else "run_terminated"
    detail = str(state.output or "the orchestration ended without finishing the run")
    return await close_abandoned_run(store, run, status, crash_error(code, detail, run.run_id))


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
) -> RunView:
    """The view of `run` given the orchestration `state` read just before (`DurableGateway.state`)."""
    # Re-read the run after the orchestration: a run the custom status calls finished has its output stored by then.
    run = await store.get_run(run.run_id) or run
    run = await reconcile(store, run, state)
    status = _status(run, state)
    first, _ = run_seq_range(run.ordinal)
    after = max(cursor if cursor is not None else first - 1, first - 1)
    page = await store.list_messages(
        run.session_id, after_seq=after, up_to_seq=_visible_seq(run, state), limit=UPDATES_PER_RESPONSE
    )
    updates = [RunUpdate(seq=record.seq, message=record.payload) for record in page.items]
    new_cursor = updates[-1].seq if updates else after
    more = page.continuation is not None
    pending = [] if run.finished else await store.list_approvals(run_id=run.run_id, status="pending")
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
        pending_approvals=[
            PendingApproval(
                approval_id=a.approval_id,
                call_id=a.call_id,
                tool=a.tool,
                arguments=a.arguments,
                expires_at=a.expires_at,
                escalated_to=a.escalated_to,
            )
            for a in pending
        ],
        usage=_usage(run, state),
        output=run.output,
        finish_reason=(run.output or {}).get("finish_reason") if run.status == "completed" else None,
        partial_output=None if run.finished else await partial_output(store, run, state),
        error=_client_error(run.error),
        continuation_token=token,
        links=links(base_url, run),
    )


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
