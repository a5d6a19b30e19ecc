"""Creating a run in the store: claim the session, write the input, build the orchestration input.

Shared by the HTTP API (a client starts a run) and workflows (a step starts a child run), so a run looks the same
however it began. Safe to repeat with the same `run_id` (a retried activity): `begin_run` and the input writes are
idempotent.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from agent_runs.contracts import RunInput, RunRef
from agent_runs.conversation_cache import ConversationCache
from agent_runs.sequence import seq_for
from agent_runs.settings import RunSettings
from agent_runs.store_log import to_record
from agent_runtime.agents import AgentDefinition
from agent_runtime.approvers import ANONYMOUS
from agent_runtime.conversation import input_message_id
from agent_runtime.escalation import Escalate
from agent_runtime.messages import Message
from agent_runtime.overrides import RunOverrides
from agent_runtime.spend import RunBudget
from session_store import MessageRecord, RunRecord, SessionRecord, SessionStore
from telemetry.trace_context import RunTrace


class SessionAgentMismatchError(ValueError):
    """The session is a conversation with another agent."""

    def __init__(self, session: SessionRecord) -> None:
        super().__init__(f"Session '{session.session_id}' is a conversation with agent '{session.agent}'.")
        self.session = session


class SessionNotOwnedError(LookupError):
    """The session belongs to another principal (callers answer as if it did not exist)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session '{session_id}' was not found.")
        self.session_id = session_id


async def open_session(
    store: SessionStore,
    session_id: str,
    agent: AgentDefinition,
    *,
    owner_id: str | None = None,
    owner_name: str | None = None,
) -> SessionRecord:
    """The session, created for `owner_id` if absent; another owner's session is `SessionNotOwnedError` (checked
    before the agent, so a caller learns nothing about a session that is not theirs)."""
    session = await store.create_session(session_id, agent.name, owner_id=owner_id, owner_name=owner_name)
    if owner_id is not None and (session.owner_id or ANONYMOUS) != owner_id:
        raise SessionNotOwnedError(session_id)
    if session.agent != agent.name:
        raise SessionAgentMismatchError(session)
    return session


async def write_input(
    store: SessionStore, run: RunRecord, messages: Sequence[Message], *, new_session: ConversationCache | None = None
) -> list[MessageRecord]:
    """Store the run's input messages at the start of its seq range; returns them as stored (one position each).
    `new_session`: the run created its session (`begin_run(new_session=...)`), so the input is the whole conversation
    so far - remembered in this cache for the run's first model call."""
    now = datetime.now(UTC)
    stored = await store.append_messages(
        run.session_id,
        [
            to_record(
                run.session_id,
                run.run_id,
                seq_for(run.ordinal, index),
                message.model_copy(update={"message_id": input_message_id(run.run_id, index), "created_at": now}),
            )
            for index, message in enumerate(messages)
        ],
    )
    if new_session is not None:
        new_session.start(run.session_id, run.run_id, run.etag, stored, below=seq_for(run.ordinal, len(messages)))
    return stored


def run_input_for(
    run: RunRecord,
    agent: AgentDefinition,
    settings: RunSettings,
    *,
    input_count: int,
    approval_timeout_seconds: float | None = None,
    budget: RunBudget | None = None,
    trace: RunTrace | None = None,
) -> RunInput:
    """`budget`: the run's, already tightened (`AgentDefinition.run_budget`); default the agent's. `trace`: the
    run's trace (`RunTrace.start`); default a new trace starting now."""
    return RunInput(
        run=RunRef(
            run_id=run.run_id,
            session_id=run.session_id,
            agent=agent.name,
            ordinal=run.ordinal,
            trace=trace or RunTrace.start(),
            tools=RunOverrides.from_record(run.overrides).tools,
        ),
        loop_config=agent.loop_config(budget),
        next_position=input_count,
        approval_timeout_seconds=approval_timeout_seconds
        or agent.approval_timeout_seconds
        or settings.default_approval_timeout_seconds,
        on_approval_timeout=agent.final_timeout_action,
        escalation=agent.on_approval_timeout if isinstance(agent.on_approval_timeout, Escalate) else None,
        discover_tools=bool(agent.mcp_servers),
        run_middleware=bool(agent.run_middleware),
        cancel_grace_seconds=settings.cancel_grace_seconds,
        steps_wait_out_outages=True,
    )


def new_run_record(
    run_id: str,
    session_id: str,
    agent: AgentDefinition,
    metadata: dict[str, Any],
    *,
    overrides: RunOverrides | None = None,
    owner_id: str | None = None,
    owner_name: str | None = None,
    branched_from: str | None = None,
) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        session_id=session_id,
        agent=agent.name,
        instance_id=run_id,
        metadata=metadata,
        overrides=overrides.to_record() if overrides is not None else {},
        owner_id=owner_id,
        owner_name=owner_name,
        branched_from=branched_from,
    )
