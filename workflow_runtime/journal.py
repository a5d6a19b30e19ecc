"""A workflow's data in the store: its run record (input, status), its journal (one message per finished step, in
its control session) and its signals. Used by the workflow activities; the orchestrator never sees content."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agent_runs.services import RunServices
from session_store import MessageRecord, RunRecord, SessionStore, SignalRecord
from telemetry.workflow_spans import emit_step_span
from workflow_runtime.contracts import JOURNAL_ROLE, StepRequest, WorkflowRef
from workflow_runtime.definition import ParallelStep, WorkflowDefinition
from workflow_runtime.registry import package_workflows

MAX_RANGE_READ = 50  # journal positions read in one query at most (`WorkflowContext.entries`)


@dataclass(frozen=True)
class WorkflowContext:
    services: RunServices
    ref: WorkflowRef
    opened_at: datetime = field(default_factory=lambda: datetime.now(UTC))  # the activity's start: a step's default

    @classmethod
    def for_ref(cls, ref: WorkflowRef) -> WorkflowContext:
        return cls(RunServices.current(), ref)

    @property
    def store(self) -> SessionStore:
        return self.services.store

    @property
    def definition(self) -> WorkflowDefinition:
        return package_workflows(self.ref.package).get(self.ref.workflow)

    async def record(self) -> RunRecord:
        # A workflow's run record is always in its control session (`http_api.workflows._begin_workflow_run`):
        # read there, without the lookup read of its session.
        record = await self.store.get_run(self.ref.run_id, session_id=self.ref.control_session)
        if record is None:
            raise LookupError(f"workflow run {self.ref.run_id!r} is not in the store")
        return record

    async def cancel_requested(self) -> bool:
        return (await self.record()).cancel_requested_at is not None

    async def data(self, refs: dict[str, int], record: RunRecord | None = None) -> dict[str, Any]:
        """`{"input": ..., "steps": {id: output}}` for reference resolution (branch outputs also by branch id).
        `record`: the run record the activity read already (its input never changes), saving a read."""
        record = record or await self.record()
        entries = await self.entries(refs.values())
        steps: dict[str, Any] = {}
        for step_id, seq in refs.items():
            entry = entries.get(seq)
            if entry is None:
                continue
            output = entry.get("output")
            steps[step_id] = output
            step = _maybe_step(self.definition, step_id)
            if isinstance(step, ParallelStep) and isinstance(output, dict):
                steps.update({b.id: output.get(b.id) for b in step.branches})
        return {"input": record.metadata.get("input", {}), "steps": steps}

    async def entries(self, seqs: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The journal entries at `seqs` (by seq; one missing is left out). Journal seqs are handed out one after
        the other, so when few positions lie between the first and the last wanted, one query of that range costs
        less than one query per entry (each query has a base charge); otherwise one query each."""
        wanted = sorted(set(seqs))
        if not wanted:
            return {}
        low, high = wanted[0], wanted[-1]
        span = high - low + 1
        if len(wanted) > 1 and span <= min(2 * len(wanted), MAX_RANGE_READ):
            page = await self.store.list_messages(
                self.ref.control_session, after_seq=low - 1, up_to_seq=high, limit=span
            )
            return {item.seq: item.payload for item in page.items if item.seq in wanted}
        found = {}
        for seq in wanted:
            page = await self.store.list_messages(self.ref.control_session, after_seq=seq - 1, up_to_seq=seq, limit=1)
            if page.items:
                found[seq] = page.items[0].payload
        return found

    async def journal(
        self,
        request: StepRequest,
        kind: str,
        *,
        output: Any = None,
        status: str = "ok",
        error: str | None = None,
        run_ids: list[str] | None = None,
        started_at: datetime | None = None,
    ) -> None:
        """Write the step's entry (upsert by a deterministic id: a retried activity rewrites the same entry), and
        the step's span: from `started_at` (the step's start when the caller knows it: its child runs' creation,
        its approval request) or this activity's start, to now."""
        payload: dict[str, Any] = {
            "role": JOURNAL_ROLE,
            "step": request.step_id,
            "key": request.key,
            "kind": kind,
            "status": status,
            "output": output,
            "error": error,
            "run_ids": run_ids or [],
            "finished_at": (request.at or datetime.now(UTC)).isoformat(),
        }
        record = MessageRecord(
            session_id=self.ref.control_session,
            message_id=f"{self.ref.run_id}:step:{request.key}",
            seq=request.seq,
            run_id=self.ref.run_id,
            role=JOURNAL_ROLE,
            payload=payload,
        )
        await self.store.append_messages(self.ref.control_session, [record])
        emit_step_span(
            self.ref.trace,
            workflow=self.ref.workflow,
            workflow_run_id=self.ref.run_id,
            key=request.key,
            step_id=request.step_id,
            kind=kind,
            status=status,
            error=error,
            started_at=started_at or self.opened_at,
        )

    async def signal(self, name: str, index: int) -> SignalRecord | None:
        """Signal `index` of `name` (the queue the API appends to), if the store has it."""
        found = await self.store.list_signals(self.ref.control_session, name, from_index=index, limit=1)
        return found[0] if found and found[0].index == index else None


def _maybe_step(definition: WorkflowDefinition, step_id: str) -> Any:
    try:
        return definition.step(step_id)
    except KeyError:
        return None
