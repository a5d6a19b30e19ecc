"""What a client sees of a workflow run: status, the active step, finished steps since its cursor (references to
child runs plus outputs), pending approvals and signals, the output or the error (naming the failed step)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agent_runs.client_errors import client_message
from agent_runs.services import RunServices
from http_api.identity import Principal
from http_api.models import PendingApproval
from http_api.run_views import reconcile
from http_api.token_binding import bound_to
from http_api.workflow_gateway import WorkflowState
from http_api.workflow_models import (
    FINAL_WORKFLOW_STATUSES,
    ActiveStep,
    StepEntry,
    WorkflowError,
    WorkflowLinks,
    WorkflowRunStatus,
    WorkflowRunView,
)
from session_store import RunRecord, SessionStore
from workflow_runtime.contracts import WorkflowProgress, control_session_id

TOKEN_SCOPE = "workflow_run"
ENTRIES_PER_RESPONSE = 100


def workflow_name(record: RunRecord) -> str | None:
    return record.agent if record.kind == "workflow" else None


def links(base_url: str, run_id: str) -> WorkflowLinks:
    return WorkflowLinks(
        self=f"{base_url}/api/workflows/runs/{run_id}",
        cancel=f"{base_url}/api/workflows/runs/{run_id}/cancel",
        approvals=f"{base_url}/api/runs/{run_id}/approvals",
        signals=f"{base_url}/api/workflows/runs/{run_id}/signals/{{name}}",
    )


async def reconcile_workflow(store: SessionStore, record: RunRecord, state: WorkflowState | None) -> RunRecord:
    """Close a workflow whose orchestration died without closing its record (crash, terminate)."""
    return await reconcile(store, record, state)


def _status(record: RunRecord, progress: WorkflowProgress | None) -> WorkflowRunStatus:
    if record.finished:
        return record.status  # type: ignore[return-value]
    return progress.status if progress is not None else "queued"


def _active(base_url: str, progress: WorkflowProgress | None) -> ActiveStep | None:
    if progress is None or progress.active_step is None:
        return None
    waiting = progress.waiting
    return ActiveStep(
        id=progress.active_step,
        kind=progress.active_kind,
        iteration=progress.iteration,
        child_runs=progress.child_runs,
        child_run_links=[f"{base_url}/api/runs/{run_id}" for run_id in progress.child_runs],
        waiting_for_approval=waiting.approval_id if waiting else None,
        waiting_for_signal=waiting.signal if waiting else None,
        waiting_until=waiting.until if waiting else None,
    )


def _client_error(error: dict[str, Any] | None) -> WorkflowError | None:
    if not error:
        return None
    code = str(error.get("code") or "failed")
    message = client_message(code, str(error.get("message") or ""))
    return WorkflowError(code=code, message=message, step=error.get("step"))


async def build_workflow_view(
    services: RunServices,
    record: RunRecord,
    state: WorkflowState | None,
    *,
    cursor: int | None,
    base_url: str,
    viewer: Principal,
) -> WorkflowRunView:
    """The view of `record` given the orchestration `state` read just before (`WorkflowGateway.state`), for
    `viewer` (the run's owner)."""
    store = services.store
    # After the state: see `http_api.run_views`. A run never leaves its session: read there, without the lookup.
    record = await store.get_run(record.run_id, session_id=record.session_id) or record
    record = await reconcile_workflow(store, record, state)
    progress = None if record.finished or state is None else state.progress
    status = _status(record, progress)
    page = await store.list_messages(
        control_session_id(record.run_id), after_seq=cursor if cursor is not None else 0, limit=ENTRIES_PER_RESPONSE
    )
    entries = [
        StepEntry(
            seq=item.seq,
            step=item.payload.get("step", ""),
            kind=item.payload.get("kind", ""),
            status=item.payload.get("status", ""),
            output=item.payload.get("output"),
            error=client_message("", item.payload["error"]) if item.payload.get("error") else None,
            run_ids=item.payload.get("run_ids") or [],
            run_links=[f"{base_url}/api/runs/{run_id}" for run_id in item.payload.get("run_ids") or []],
            finished_at=item.payload.get("finished_at"),
        )
        for item in page.items
    ]
    new_cursor = entries[-1].seq if entries else (cursor or 0)
    final = status in FINAL_WORKFLOW_STATUSES
    pending = (
        [] if record.finished
        else await store.list_approvals(run_id=record.run_id, session_id=record.session_id, status="pending")
    )
    token = None
    if not final or page.continuation is not None:
        token = services.tokens.issue(TOKEN_SCOPE, record.run_id, {"seq": new_cursor, **bound_to(record.owner_id)})
    error = record.error
    return WorkflowRunView(
        run_id=record.run_id,
        workflow=workflow_name(record) or record.agent,
        status=status,
        session_id=record.metadata.get("session_id"),
        created_at=record.created_at,
        updated_at=record.updated_at,
        active_step=None if final else _active(base_url, progress),
        steps=entries,
        pending_approvals=[PendingApproval.of(a, record, viewer, now=datetime.now(UTC)) for a in pending],
        pending_signals=[progress.waiting.signal] if progress and progress.waiting and progress.waiting.signal else [],
        output=record.output,
        error=_client_error(error),
        continuation_token=token,
        links=links(base_url, record.run_id),
    )
