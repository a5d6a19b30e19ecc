"""Reading a run the way the Responses routes and streams show it: one `RunSnapshot` per look (the same reading as
the run routes' views, `run_views`), and the id of the response a conversation's run continues."""

from __future__ import annotations

from dataclasses import dataclass

from agent_runs.contracts import RunProgress
from agent_runs.sequence import run_seq_range
from agent_runs.services import RunServices
from agent_runs.store_log import load_session_records
from http_api.decision_delivery import ring_stalled
from http_api.durable_gateway import DurableGateway, OrchestrationState
from http_api.openai_responses.conversation import StoredItem
from http_api.openai_responses.ids import ResponseRef
from http_api.openai_responses.mapping import RunSnapshot, build_response, input_items, turn_count
from http_api.run_views import reconcile, run_status, run_usage, visible_seq
from session_store import RunRecord


async def read_snapshot(
    services: RunServices,
    gateway: DurableGateway,
    run: RunRecord,
    state: OrchestrationState[RunProgress] | None,
    previous_response_id: str | None = None,
) -> RunSnapshot:
    """The run as of `state` (read just before): the same reading as the run routes' views (`run_views`)."""
    store = services.store
    progress = state.progress if state is not None else None
    if progress is not None:
        await ring_stalled(store, gateway, run, progress.pending_approvals,
                           stalled_after=services.run_settings.decision_redelivery_after)
    run = await reconcile(store, await store.get_run(run.run_id) or run, state)
    messages = []
    if run.ordinal > 0:  # 0: queued behind another run of the session (started elsewhere with if_busy): nothing yet
        first, _ = run_seq_range(run.ordinal)
        messages = await load_session_records(
            store, run.session_id, after_seq=first - 1, up_to_seq=visible_seq(run, state)
        )
    return RunSnapshot(
        run=run,
        status=run_status(run, state),
        messages=messages,
        approvals=await store.list_approvals(run_id=run.run_id),
        usage=run_usage(run, state),
        waiting_on=list(progress.pending_approvals) if progress is not None and not run.finished else [],
        finish_reason=progress.reason if progress is not None else None,
        previous_response_id=previous_response_id,
    )


async def finished_snapshot(services: RunServices, run: RunRecord) -> RunSnapshot:
    """A finished run from the store alone (its orchestration has nothing more to say)."""
    first, last = run_seq_range(run.ordinal)
    messages = await load_session_records(services.store, run.session_id, after_seq=first - 1, up_to_seq=last)
    return RunSnapshot(
        run=run,
        status=run.status,
        messages=messages,
        approvals=await services.store.list_approvals(run_id=run.run_id),  # its turns depend on them
        usage=run_usage(run, None),
    )


async def previous_response_of(services: RunServices, run: RunRecord) -> str | None:
    """The id of the last turn of the session's run before `run` (what its `previous_response_id` was); for the
    first run of a session branched from an earlier response (`handlers._branch`), that response, as its record
    says (no read: most first runs are no branch)."""
    if run.ordinal <= 1:
        return run.branched_from if run.ordinal == 1 else None
    earlier = next((r for r in await services.store.list_runs(run.session_id) if r.ordinal == run.ordinal - 1), None)
    if earlier is None:
        return None
    return ResponseRef(earlier.run_id, turn_count(await finished_snapshot(services, earlier))).response_id


@dataclass(frozen=True)
class Conversation:
    """A session as the Responses API shows it: every turn's input and output items, oldest first, and its latest
    response (the one a new input continues)."""

    items: list[StoredItem]
    latest_run: RunRecord
    latest: ResponseRef


async def conversation_of(services: RunServices, gateway: DurableGateway, session_id: str) -> Conversation | None:
    runs = sorted(
        (r for r in await services.store.list_runs(session_id) if r.kind == "agent" and r.ordinal > 0),
        key=lambda r: r.ordinal,
    )
    if not runs:
        return None
    items: list[StoredItem] = []
    latest = ResponseRef(runs[-1].run_id)
    for run in runs:
        if run is runs[-1]:
            snapshot = await read_snapshot(services, gateway, run, await gateway.state(run.run_id))
        else:
            snapshot = await finished_snapshot(services, run)
        for turn in range(1, turn_count(snapshot) + 1):
            ref = ResponseRef(run.run_id, turn)
            response = build_response(snapshot, ref)
            if response is None:
                break
            items += input_items(snapshot, ref)
            items += response.output
            latest = ref
    return Conversation(items=items, latest_run=runs[-1], latest=latest)
