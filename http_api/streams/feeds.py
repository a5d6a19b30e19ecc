"""What a stream shows of one run, read the way polls read it.

A feed turns "the orchestration state just read" into the stream's snapshot parts with the poll views' own builders
(`build_run_view`, `build_workflow_view`), so a stream and a poll of the same run agree by construction: `update`
events carry the poll's updates (agent runs: `{seq, message}`; workflow runs: the finished-step entries, `{seq, ...}`),
`status` carries what polls show as status, `done` the final view.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import azure.durable_functions as df

from agent_runs.services import RunServices
from agent_runtime.messages import Message
from http_api.decision_delivery import ring_stalled
from http_api.durable_gateway import DurableGateway
from http_api.identity import Principal
from http_api.models import FINAL_STATUSES
from http_api.run_views import UPDATES_PER_RESPONSE, build_run_view
from http_api.workflow_doorbells import repair_waiting
from http_api.workflow_gateway import WorkflowGateway
from http_api.workflow_models import FINAL_WORKFLOW_STATUSES
from http_api.workflow_views import ENTRIES_PER_RESPONSE, build_workflow_view
from session_store import REOPENABLE_RUN_STATUS, RunRecord

from .cursor import text_bytes, text_fingerprint, text_hasher

log = logging.getLogger(__name__)
# How often a stream of a run that waits (for decisions, signals) looks for what a poll would repair, at most: its
# run record read again, and a query of its approvals or signals.
REPAIR_SECONDS = 1.0
# The final statuses no request changes again (a rewind reopens a failed run).
SETTLED_STATUSES = FINAL_STATUSES - {REOPENABLE_RUN_STATUS}


@dataclass(frozen=True)
class Refresh:
    updates: list[dict[str, Any]]  # new since `after`, in seq order
    status: dict[str, Any]
    done: dict[str, Any] | None  # the final view once the run has finished
    snapshot: Any = None  # the feed's whole reading of the run, for connections that render it themselves


@dataclass(frozen=True)
class Draft:
    seq: int
    message_id: str
    text: str
    # Fingerprints of the text's starts by length (`cursor.text_fingerprint`), which every client of the run compares
    # its cursor with: the watcher computes them once for all, the draft's growth sharing one table (`grown`).
    known: dict[int, str] = field(default_factory=dict, compare=False, repr=False)
    hasher: Any = field(default=None, compare=False, repr=False)  # the hash of `text` so far, to extend

    def fingerprint(self, length: int) -> str:
        """The fingerprint of the first `length` characters."""
        known = self.known.get(length)
        if known is None:  # a client resumed at a length this watcher never had (another process's draft)
            known = self.known[length] = text_fingerprint(self.text[:length])
        return known

    def grown(self, previous: Draft | None) -> Draft:
        """This draft with its text's fingerprint; when it extends `previous` (the same answer, more tokens), hashed
        from where `previous` ended, so each character is hashed once however long the answer and however many
        clients follow it. A text that is not an extension (a retried model call started over) starts anew."""
        if (previous is not None and previous.hasher is not None and previous.seq == self.seq
                and self.text.startswith(previous.text)):
            hasher, known = previous.hasher.copy(), previous.known
            hasher.update(text_bytes(self.text[len(previous.text):]))
        else:
            hasher, known = text_hasher(self.text), {}
        known[len(self.text)] = hasher.hexdigest()
        return Draft(self.seq, self.message_id, self.text, known, hasher)


class Feed(Protocol):
    kind: str
    run_id: str
    writes_answers: bool  # model answers are written in this run: the watcher follows their drafts

    async def read_state(self) -> Any: ...

    async def refresh(self, state: Any, after: int) -> Refresh: ...

    def draft_seq(self, state: Any) -> int | None: ...

    async def read_draft(self, seq: int) -> Draft | None: ...


class RepairClock:
    """When a stream's next look for what a poll would repair is due (a store read or two: see `REPAIR_SECONDS`)."""

    def __init__(self, services: RunServices) -> None:
        self._settings = services.run_settings
        self._next = 0.0

    def due(self) -> bool:
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + max(self._settings.decision_redelivery_seconds, REPAIR_SECONDS)
        return True


class RunFeed:
    kind = "run"
    writes_answers = True

    def __init__(self, services: RunServices, client: df.DurableOrchestrationClient, run: RunRecord,
                 base_url: str, viewer: Principal) -> None:
        # `viewer`: the run's owner (only they open its stream) with the roles of this watcher's clients' tokens.
        self.services, self.run, self.base_url, self.viewer = services, run, base_url, viewer
        self.run_id = run.run_id
        self.gateway = DurableGateway(client)
        self._repairs = RepairClock(services)

    async def read_state(self) -> Any:
        state = await self.gateway.state(self.run_id)
        await self._redeliver_stalled(state)
        return state

    async def _redeliver_stalled(self, state: Any) -> None:
        """Ring again for decisions the store holds that the run has not applied (their event failed, or the API
        died between the two), or for its cancel, flagged but not delivered, as a poll does (`ring_stalled`): a
        client that follows the run by its stream (the page) may never poll, and a decided approval is no longer
        shown to be decided (nor one of a flagged run decidable), so the run would wait for its deadline. The run is
        read again for its flag (the record this stream opened with is older)."""
        progress = getattr(state, "progress", None)
        if progress is None or not progress.pending_approvals or not self._repairs.due():
            return
        try:
            run = await self.services.store.get_run(self.run_id)
            if run is not None:
                await ring_stalled(self.services.store, self.gateway, run, progress.pending_approvals,
                                   stalled_after=self.services.run_settings.decision_redelivery_after)
        except Exception as error:  # best effort, like the poll's: the stream goes on
            log.warning("stream of %s: stalled decisions not checked: %s", self.run_id, error)

    async def refresh(self, state: Any, after: int) -> Refresh:
        updates: list[dict[str, Any]] = []
        while True:
            view = await build_run_view(self.services.store, self.services.tokens, self.run, state,
                                        cursor=after if after >= 0 else None, base_url=self.base_url,
                                        viewer=self.viewer)
            updates += [u.model_dump(mode="json") for u in view.updates]
            if len(view.updates) < UPDATES_PER_RESPONSE:
                break
            after = view.updates[-1].seq
        status = {
            "status": view.status,
            "pending_approvals": [a.model_dump(mode="json") for a in view.pending_approvals],
        }
        done = None
        if view.status in FINAL_STATUSES:
            done = view.model_copy(update={"updates": [], "partial_output": None}).model_dump(mode="json")
        return Refresh(updates, status, done)

    def draft_seq(self, state: Any) -> int | None:
        progress = getattr(state, "progress", None)
        return progress.model_call_seq if progress is not None else None

    async def read_draft(self, seq: int) -> Draft | None:
        page = await self.services.store.list_messages(self.run.session_id, after_seq=seq - 1, up_to_seq=seq, limit=1)
        if not page.items:
            return None
        message = Message.model_validate(page.items[0].payload)
        return Draft(seq, message.message_id or "", message.text)


class WorkflowFeed:
    """Updates are finished steps; the status adds the active step and the progress of its child runs."""

    kind = "workflow"
    writes_answers = False

    def __init__(self, services: RunServices, client: df.DurableOrchestrationClient, record: RunRecord,
                 base_url: str, viewer: Principal) -> None:
        self.services, self.record, self.base_url, self.viewer = services, record, base_url, viewer
        self.run_id = record.run_id
        self.gateway = WorkflowGateway(client)
        self.children = DurableGateway(client)
        self._settled_children: dict[str, str] = {}  # a child's status no request can change, read no more
        self._repairs = RepairClock(services)

    async def read_state(self) -> Any:
        state = await self.gateway.state(self.run_id)
        await self._repair_waiting(state)
        children: tuple[tuple[str, str], ...] = ()
        if state is not None and state.progress is not None:
            # Child runs move on without the workflow's status changing: their status is part of what is watched.
            children = tuple([(child, await self._child_status(child)) for child in state.progress.child_runs])
        return state, children

    async def _repair_waiting(self, state: Any) -> None:
        """What a poll repairs of a workflow that waits (`workflow_doorbells.repair_waiting`: a gate's decision, a
        signal or its cancel not heard), for a client that follows it by its stream only (the page)."""
        progress = getattr(state, "progress", None)
        if progress is None or progress.waiting is None or not self._repairs.due():
            return
        try:
            record = await self.services.store.get_run(self.run_id)
            if record is not None and not record.finished:
                await repair_waiting(self.services.store, self.gateway, record, progress,
                                     stalled_after=self.services.run_settings.decision_redelivery_after)
        except Exception as error:  # best effort, like the poll's: the stream goes on
            log.warning("stream of workflow %s: what it waits for not checked: %s", self.run_id, error)

    async def _child_status(self, run_id: str) -> str:
        """Read on every look until settled for good: `completed` or `cancelled` (a rewind reopens only a `failed`
        run, `session_store.rules.reopen`). A failed child is read again: it can be rewound on its own and go on while
        the workflow waits for its other branches. So a look reads at most the active step's child runs (as while they
        all run), and the cache never holds a status that can still change."""
        status = self._settled_children.get(run_id)
        if status is None:
            status = await self._read_child_status(run_id)
            if status in SETTLED_STATUSES:
                self._settled_children[run_id] = status
        return status

    async def _read_child_status(self, run_id: str) -> str:
        child = await self.children.state(run_id)
        if child is not None and child.progress is not None:
            return child.progress.status
        record = await self.services.store.get_run(run_id)
        return record.status if record is not None else "queued"

    async def refresh(self, state: Any, after: int) -> Refresh:
        workflow_state, children = state
        updates: list[dict[str, Any]] = []
        while True:
            view = await build_workflow_view(self.services, self.record, workflow_state,
                                             cursor=after if after >= 0 else None, base_url=self.base_url,
                                             viewer=self.viewer)
            updates += [s.model_dump(mode="json") for s in view.steps]
            if len(view.steps) < ENTRIES_PER_RESPONSE:
                break
            after = view.steps[-1].seq
        final = view.status in FINAL_WORKFLOW_STATUSES
        status = {
            "status": view.status,
            "active_step": view.active_step.model_dump(mode="json") if view.active_step else None,
            "child_runs": [] if final else [{"run_id": run_id, "status": s} for run_id, s in children],
            "pending_approvals": [a.model_dump(mode="json") for a in view.pending_approvals],
            "pending_signals": list(view.pending_signals),
        }
        done = view.model_copy(update={"steps": []}).model_dump(mode="json") if final else None
        return Refresh(updates, status, done)

    def draft_seq(self, state: Any) -> int | None:
        return None

    async def read_draft(self, seq: int) -> Draft | None:
        return None
