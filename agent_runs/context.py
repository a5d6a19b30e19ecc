"""What every activity starts from: the services, the run's agent, and a conversation log for its seq block."""

from __future__ import annotations

from dataclasses import dataclass

from agent_runs.contracts import RunRef
from agent_runs.run_tools import agent_for_run
from agent_runs.sequence import run_seq_range
from agent_runs.services import RunServices
from agent_runs.store_log import OpenRunLog, StoreConversationLog
from agent_runtime.agents import AgentDefinition
from agent_runtime.overrides import RunOverrides
from session_store import RunRecord, SessionStore


@dataclass(frozen=True)
class StepContext:
    services: RunServices
    run: RunRef

    @classmethod
    def for_run(cls, run: RunRef) -> StepContext:
        return cls(RunServices.current(), run)

    @property
    def store(self) -> SessionStore:
        return self.services.store

    @property
    def agent(self) -> AgentDefinition:
        """The definition as registered (without the run's MCP tools: see `run_agent`)."""
        return self.services.agents.get(self.run.agent)

    async def run_agent(self) -> AgentDefinition:
        """The agent with the tools recorded for this run (MCP tools discovered at its start)."""
        return await agent_for_run(self.store, self.agent, self.run.run_id)

    def session_log(self, first_seq: int | None = None, slots: int = 1) -> StoreConversationLog:
        """The whole conversation of the session (what the model is sent); writes go to the reserved seqs."""
        return StoreConversationLog(self.store, self.run.session_id, self.run.run_id, first_seq=first_seq, slots=slots)

    def run_log(self, first_seq: int | None = None, slots: int = 1) -> StoreConversationLog:
        """Only this run's messages: enough for tool, approval and finish steps (their calls, results and
        decisions all belong to the run; earlier runs closed theirs), and O(run) instead of O(session)."""
        first, _ = run_seq_range(self.run.ordinal)
        return StoreConversationLog(
            self.store, self.run.session_id, self.run.run_id, first_seq=first_seq, slots=slots, after_seq=first - 1
        )

    def open_run_log(self, first_seq: int, slots: int = 1) -> OpenRunLog:
        """`run_log` that drops writes once the run has closed (see `OpenRunLog`)."""
        first, _ = run_seq_range(self.run.ordinal)
        return OpenRunLog(
            self.store, self.run.session_id, self.run.run_id, first_seq=first_seq, slots=slots, after_seq=first - 1
        )

    async def cancel_requested(self) -> bool:
        record = await self.store.get_run(self.run.run_id)
        return record is not None and record.cancel_requested_at is not None

    async def record(self) -> RunRecord | None:
        return await self.store.get_run(self.run.run_id)


def overrides_of(record: RunRecord | None) -> RunOverrides:
    """The run's own instructions and output format (none for a run started without them)."""
    return RunOverrides.from_record(record.overrides if record is not None else None)
