"""What every activity starts from: the services, the run's agent, and a conversation log for its seq block."""

from __future__ import annotations

from dataclasses import dataclass

from agent_runs.contracts import RunRef
from agent_runs.services import RunServices
from agent_runs.store_log import StoreConversationLog
from agent_runtime.agents import AgentDefinition
from session_store import SessionStore


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
        return self.services.agents.get(self.run.agent)

    def log(self, first_seq: int | None = None, slots: int = 1) -> StoreConversationLog:
        return StoreConversationLog(self.store, self.run.session_id, self.run.run_id, first_seq=first_seq, slots=slots)

    async def cancel_requested(self) -> bool:
        record = await self.store.get_run(self.run.run_id)
        return record is not None and record.cancel_requested_at is not None
