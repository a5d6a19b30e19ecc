"""What every activity starts from: the services, the run's agent, and a conversation log for its seq block."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from agent_runs.contracts import RunRef
from agent_runs.run_tools import agent_for_run
from agent_runs.sequence import run_seq_range
from agent_runs.services import RunServices
from agent_runs.store_log import CacheUse, OpenRunLog, SnapshotLog, StoreConversationLog
from agent_runtime.agents import AgentDefinition
from agent_runtime.conversation import result_message_id
from agent_runtime.overrides import RunOverrides
from session_store import RunRecord, SessionStore

L = TypeVar("L", bound=StoreConversationLog)


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
        """The agent with the tools recorded for this run (MCP tools discovered at its start), narrowed as the run
        was asked (`RunRef.tools`)."""
        agent = await agent_for_run(self.store, self.agent, self.run.run_id, session_id=self.run.session_id)
        return self.run.tools.apply(agent) if self.run.tools is not None else agent

    def session_log(
        self, first_seq: int | None = None, slots: int = 1, *, record: RunRecord | None = None
    ) -> StoreConversationLog:
        """The whole conversation of the session (what the model is sent); writes go to the reserved seqs. With the
        run's `record` as the step just read it, a step with nothing of the run in flight below its block (a model
        call) reads through the process's conversation cache."""
        return self._session_log(StoreConversationLog, first_seq, slots, record)

    def open_session_log(self, first_seq: int, slots: int, *, record: RunRecord | None) -> OpenRunLog:
        """`session_log` that drops writes once the run has closed (`OpenRunLog`): a model call abandoned by a cancel
        must not store its answer (nor drafts of it) in the closed run."""
        return self._session_log(OpenRunLog, first_seq, slots, record)

    def _session_log(self, kind: type[L], first_seq: int | None, slots: int, record: RunRecord | None) -> L:
        log = kind(self.store, self.run.session_id, self.run.run_id, first_seq=first_seq, slots=slots)
        if record is not None:
            log.use_cache(CacheUse(self.services.conversations, run_etag=record.etag, whole=True))
        return log

    def run_log(
        self, first_seq: int | None = None, slots: int = 1, *, cached: CacheUse | None = None
    ) -> StoreConversationLog:
        """Only this run's messages: enough for tool, approval and finish steps (their calls, results and
        decisions all belong to the run; earlier runs closed theirs), and O(run) instead of O(session). `cached`:
        read through the conversation cache (`self.cache_use(...)`)."""
        return self._run_log(StoreConversationLog, first_seq, slots, cached)

    def cache_use(self, record: RunRecord | None, **needs: Sequence[str]) -> CacheUse | None:
        """How a step that read the run's `record` uses the conversation cache (None without a record)."""
        if record is None:
            return None
        return CacheUse(self.services.conversations, run_etag=record.etag, **needs)  # type: ignore[arg-type]

    def run_changed(self, before: RunRecord | None, after: RunRecord | None) -> None:
        """This step changed the run's record (an ETag-conditioned write): the conversation cache follows it."""
        if before is not None and after is not None:
            self.services.conversations.run_changed(self.run.session_id, self.run.run_id, before.etag, after.etag)

    def closing_run_log(self, first_seq: int, slots: int, *, record: RunRecord | None = None) -> SnapshotLog:
        """`run_log` for the run's last step, read once (`SnapshotLog`); with the run's `record` as just read, through
        the conversation cache (every step before it has completed)."""
        cached = CacheUse(self.services.conversations, run_etag=record.etag, whole=True) if record is not None else None
        return self._run_log(SnapshotLog, first_seq, slots, cached)

    def open_run_log(
        self, first_seq: int, slots: int = 1, *, call_id: str | None = None, cached: CacheUse | None = None
    ) -> OpenRunLog:
        """`run_log` that drops writes once the run has closed (see `OpenRunLog`). `call_id`: the tool call the step
        answers - it then reads through the conversation cache (the call from the settled part of the run, its own
        result, if an earlier attempt stored it, by id); else `cached` as for `run_log`."""
        if call_id is not None:
            probe = result_message_id(self.run.run_id, call_id)
            cached = CacheUse(self.services.conversations, needs_calls=(call_id,), probe_ids=(probe,))
        return self._run_log(OpenRunLog, first_seq, slots, cached)

    def _run_log(self, kind: type[L], first_seq: int | None, slots: int, cached: CacheUse | None) -> L:
        first, _ = run_seq_range(self.run.ordinal)
        log = kind(
            self.store, self.run.session_id, self.run.run_id, first_seq=first_seq, slots=slots, after_seq=first - 1
        )
        if cached is not None:
            log.use_cache(cached)
        return log

    async def cancel_requested(self) -> bool:
        record = await self.record()
        return record is not None and record.cancel_requested_at is not None

    async def record(self) -> RunRecord | None:
        """The run's record, read now (cancel requests and the finish change it; the session is in the `RunRef`, so
        no lookup read)."""
        return await self.store.get_run(self.run.run_id, session_id=self.run.session_id)


_NO_OVERRIDES = RunOverrides()  # frozen: shared by every run started without overrides


def overrides_of(record: RunRecord | None) -> RunOverrides:
    """The run's own instructions and output format (none for a run started without them)."""
    if record is None or not record.overrides:
        return _NO_OVERRIDES
    return RunOverrides.from_record(record.overrides)
