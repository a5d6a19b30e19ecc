"""Start a run on behalf of another orchestration (a workflow step): the same records an API-started run has.

Idempotent for a given `run_id` (Durable may run the calling activity twice): the session is opened if absent,
`begin_run` returns the stored run, and the input message has a deterministic id. A retry may find the run closed by
the store in place of its start (an attempt that claimed the session and died before writing the run, 60 s gone:
`rules.is_unwritten_start`): like an API start (`run_lifecycle.create_and_start`), it is never started.
"""

from __future__ import annotations

from typing import Any

from agent_runs.contracts import RunInput
from agent_runs.services import RunServices
from agent_runs.starting import new_run_record, open_session, run_input_for, write_input
from agent_runtime.agents import AgentDefinition
from agent_runtime.messages import Message
from notifications.starting import prepare_notifications
from session_store import ConflictError, RunRecord, SessionRecord, SessionStore
from session_store.rules import is_unwritten_start
from telemetry.trace_context import RunTrace


async def prepare_child_run(
    services: RunServices,
    *,
    run_id: str,
    session_id: str,
    agent_name: str,
    prompt: str,
    metadata: dict[str, Any],
    trace: RunTrace | None = None,
    owner_id: str | None = None,
    owner_name: str | None = None,
) -> RunInput | None:
    """Create the run in the store (owned by whoever owns the workflow) and return the `agent_run` orchestration
    input to start it with; None when the store closed the run in place of an earlier attempt's start (failed,
    `start_interrupted`): nothing is written to it nor started, and its record says why the step failed."""
    agent = services.agents.get(agent_name)
    store = services.store
    record = new_run_record(run_id, session_id, agent, metadata, owner_id=owner_id, owner_name=owner_name)
    run = await _begin(store, record, agent)
    if is_unwritten_start(run):
        return None
    # A session of its own holds only this run's messages, and the run has not started (its orchestration starts
    # once this returns): its input is the whole conversation, remembered for its first model call (no query).
    own = services.conversations if session_id == run_id else None
    input_count = len(await write_input(store, run, [Message(role="user", contents=prompt)], new_session=own))
    if trace is not None and run.created_at is not None:
        trace = trace.model_copy(update={"started_at": run.created_at})  # the same start on a retried activity
    run_input = run_input_for(run, agent, services.run_settings, input_count=input_count, trace=trace)
    return run_input.notifying(await prepare_notifications(store, run, None))


async def _begin(store: SessionStore, record: RunRecord, agent: AgentDefinition) -> RunRecord:
    """Claim the run's session. A session of its own (named after the run) is created already held by the run: one
    write instead of created, then claimed (a run read, a session read and a replace). When it exists already and
    is not this run's (a step run again after a rewind; a session someone else made) that is a conflict: the
    session is then opened and claimed as any other, with the same checks (owner, agent) and the same outcome (the
    stored run if it exists)."""
    if record.session_id == record.run_id:
        fresh = SessionRecord(
            session_id=record.session_id, agent=agent.name, owner_id=record.owner_id, owner_name=record.owner_name
        )
        try:
            return await store.begin_run(record, new_session=fresh)
        except ConflictError:
            pass
    await open_session(store, record.session_id, agent, owner_id=record.owner_id, owner_name=record.owner_name)
    return await store.begin_run(record)
