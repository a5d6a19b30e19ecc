"""`POST /api/runs/{run_id}/fork`: a new session whose conversation is the run's session up to (not including) the
run's input, and a run there with a new input or the run's own. The original session is not touched. The same copy
serves a Responses request that branches a conversation from an earlier response (`copy_for`, through that run's end).

The copied messages keep their order and ids and take the positions before any run of the new session (seq 0, 1,
...), so the new session's runs number from 1 as in any session. The new session records where it came from
(`forked_from`) and belongs to the caller, who must own the run. With an `Idempotency-Key`, the same request again
answers with the run it started; one whose run was written but never started (its request died in between) starts
it once that request is surely over, as a start's retry does (`RunStart.unstarted`), in the session already copied.
A fork that fails before its run is written (provably: `create_and_start` closed the run in its place, so no late
write of it lands) deletes its copy before releasing its key, so no session without its run stays behind and a retry
copies afresh; one that cannot tell keeps both, and its retry answers with (or starts) the run in that copy. A fork
killed outright after copying leaves its copy, named after its run: the key's retry that gives up the dead request's
claim deletes it (`discard_abandoned_copy`); without a key it stays (docs/repair.md).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated

import azure.durable_functions as df
import azure.functions as func
from pydantic import Field, StringConstraints, field_validator

from agent_runs.sequence import run_seq_range
from agent_runs.services import RunServices
from agent_runtime.conversation import input_message_id
from agent_runtime.messages import Message
from agent_runtime.overrides import RunOverrides
from agent_runtime.spend import RunBudget
from http_api.adapter import http_endpoint, read_json_body
from http_api.caller import current_principal
from http_api.durable_gateway import DurableGateway
from http_api.models import MAX_WAIT_SECONDS, InputMessage, StrictModel, checked_run_input
from http_api.problems import ApiProblem
from http_api.run_lifecycle import RunStart, abandon, claim_start
from http_api.runs import (
    agent_or_404,
    answer_started_run,
    is_workflow_run,
    request_budget,
    run_or_404,
    start_agent_run,
)
from session_store import MessageRecord, RunRecord, SessionStore
from session_store.rules import is_unwritten_start

log = logging.getLogger(__name__)

COPY_BATCH = 50
# A write of the fork's run can land after its copy was deleted once (it was on its way), not over and over.
DISCARD_ROUNDS = 3
# A workflow's child run says so in its metadata (`activities.workflow_agents`); its fork is a run of its own.
WORKFLOW_METADATA = frozenset({"workflow_run_id", "workflow_step"})


ForkInput = Annotated[str, StringConstraints(min_length=1)] | Annotated[list[InputMessage], Field(min_length=1)]


class ForkRequest(StrictModel):
    """`POST /api/runs/{run_id}/fork`: `input` replaces the run's input (default: the same input again); `budget`
    limits the new run as a start's does (the agent's, each limit only lower)."""

    input: ForkInput | None = None
    wait_seconds: Annotated[float, Field(ge=0, le=MAX_WAIT_SECONDS)] = 0
    budget: RunBudget | None = Field(
        default=None, description="limits for the new run; each may only be lower than the agent's (422 otherwise)"
    )

    @field_validator("input")
    @classmethod
    def _input_asks_something(cls, value: str | list[InputMessage] | None) -> str | list[InputMessage] | None:
        return None if value is None else checked_run_input(value)  # as a start's: a fork is a start

    def input_messages(self) -> list[InputMessage] | None:
        if self.input is None:
            return None
        return [InputMessage(content=self.input)] if isinstance(self.input, str) else list(self.input)


@http_endpoint
async def fork_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    services = RunServices.current()
    store = services.store
    run = await run_or_404(store, req.route_params["run_id"])
    body = read_json_body(req, ForkRequest) if req.get_body() else ForkRequest()
    if is_workflow_run(run):
        raise ApiProblem(409, "workflow_fork_unsupported", "Workflow runs cannot be forked",
                         "Fork the agent runs of its steps, or start the workflow again.", field="path.run_id")
    if run.ordinal == 0:
        raise ApiProblem(409, "run_not_started", "The run has not started",
                         "A queued run has no place in its conversation yet.", field="path.run_id")
    agent = agent_or_404(services, run.agent)
    budget = request_budget(agent, body.budget)  # before the key is claimed: a refused budget leaves it unused
    requested = body.input_messages()
    inputs = (
        [Message(role=m.role, contents=m.content) for m in requested]
        if requested is not None
        else await _original_input(store, run)
    )
    gateway = DurableGateway(client)
    start = await claim_start(req, store, f"runs/{run.run_id}/fork", body, gateway,
                              on_abandoned=lambda claim: discard_abandoned_copy(store, claim.result_id, run.run_id))
    forked = start.replay
    stored_input: list[MessageRecord] | None = None
    if forked is None:
        given_up = start.release
        if start.written is not None:  # written by an earlier request that never started it
            session_id = start.written.session_id  # the conversation was copied before the run was written: not again
        else:
            session_id, given_up = await copy_for(store, run, start)
        stored_input = []
        forked = await start_agent_run(
            services, gateway, agent, run_id=start.run_id, written=start.written, session_id=session_id, inputs=inputs,
            metadata={key: value for key, value in run.metadata.items() if key not in WORKFLOW_METADATA},
            budget=budget, on_unclaimed=given_up, stored_input=stored_input,
            # The run again as it was asked: its own instructions, output format and tool restrictions (a Responses
            # request's), which are not the agent's.
            overrides=RunOverrides.from_record(run.overrides) if run.overrides else None,
        )
    return await answer_started_run(services, gateway, forked, req, body.wait_seconds, stored_input=stored_input)


async def _original_input(store: SessionStore, run: RunRecord) -> list[Message]:
    inputs = await run_input(store, run)
    if not inputs:
        raise ApiProblem(409, "run_input_missing", "The run's input is not in its session",
                         "Give the fork an input.", field="body.input")
    return inputs


async def run_input(store: SessionStore, run: RunRecord) -> list[Message]:
    """The run's input messages as stored at the start of its place in its session (none if they are not there)."""
    first, last = run_seq_range(run.ordinal)
    page = await store.list_messages(run.session_id, after_seq=first - 1, up_to_seq=last, limit=COPY_BATCH)
    inputs = []
    for index, record in enumerate(page.items):
        if record.message_id != input_message_id(run.run_id, index):
            break
        inputs.append(Message.model_validate(record.payload).model_copy(update={"message_id": None}))
    return inputs


async def copy_for(
    store: SessionStore, run: RunRecord, start: RunStart, branched_at: str | None = None
) -> tuple[str, Callable[[], Awaitable[None]]]:
    """The new session of `start`'s run, holding `run`'s conversation before its input - or, `branched_at` (the id
    of the run's last response, for the record), through the run's end - and what the start does when it provably
    wrote no run (its `on_unclaimed`: the copy goes, then the key is released).

    The copy is named after its run (a fresh id too): a retry with the key finds the copy of a request that died
    before writing its run (`discard_abandoned_copy`), and the run needs no index item to be found."""
    session_id = start.run_id
    try:
        await _copy_conversation(store, run, session_id, branched_at)
    except Exception:
        # No run was written, nor is one on its way: the key stays usable for a retry (else 409 busy for 24 h)
        await _discarding_copy(store, session_id, start)()
        raise
    return session_id, _discarding_copy(store, session_id, start, _planned(run.agent, start.run_id))


def _discarding_copy(
    store: SessionStore, session_id: str, start: RunStart, planned: RunRecord | None = None
) -> Callable[[], Awaitable[None]]:
    """What a fork does when it provably wrote no run (`create_and_start`'s `on_unclaimed`, or its copy failed):
    its copy goes, then its key is released. A copy without a run is no fork: left, it would stay in the caller's
    session listings, and a retry (with the key released, or without one) makes a copy of its own. Best effort: a
    store that fails the delete leaves the copy, as a request that dies outright does.

    `planned`: the fork's run, whose start the store closed in its place (`close_unwritten_start`) before this - a
    record the delete takes with the copy. It is closed again after the delete, so that a write of the run still on
    its way (slower than its error: Cosmos writes the claim and the run apart) cannot land in the deleted copy as a
    run without its session; one that landed in between goes with the copy too, and is closed again, so what stays
    of a failed fork is only that record (which the run routes take for no run, and which expires a day on:
    `rules.retention_seconds`)."""

    async def discard() -> None:
        await _discard_copy(store, session_id, planned)
        await start.release()

    return discard


async def _discard_copy(store: SessionStore, session_id: str, planned: RunRecord | None) -> None:
    try:
        for _ in range(DISCARD_ROUNDS):
            await store.delete_session(session_id)
            if planned is None:
                return
            late, closed = await store.close_unwritten_start(planned)
            if closed or is_unwritten_start(late):
                return
            # The run's own write landed between the delete and the close: no request will start it (its own
            # failed), so it is no run either - it goes with the copy again, and the close after it is its record.
        if not late.finished:  # still landing: a run that never starts must not stay open
            await abandon(store, late)
    except Exception:
        log.warning("could not delete the copy %s of a fork that failed", session_id, exc_info=True)


def _planned(agent: str, run_id: str) -> RunRecord:
    """The fork run `run_id` of `agent` as its start means to write it (in its copy, named after it), the caller's."""
    caller = current_principal()
    return RunRecord(run_id=run_id, session_id=run_id, agent=agent, owner_id=caller.id, owner_name=caller.name)


async def discard_abandoned_copy(store: SessionStore, run_id: str, forked_run_id: str | None = None) -> None:
    """An earlier fork request with this key died (its process ended, or it failed unable to tell whether its run was
    written) and, 5 minutes on, its run `run_id` does not exist: its copy, if it made one (named after the run, a copy
    of `forked_run_id`'s conversation - of any run's for a Responses create, whose key is claimed before it knows
    which response it continues), is deleted as a failed fork's is, before the key forks afresh - unless the caller
    has run something in it since."""
    copy = await store.get_session(run_id)
    if copy is None or copy.forked_from is None or copy.owner_id != current_principal().id:
        return
    if forked_run_id is not None and copy.forked_from.get("run_id") != forked_run_id:
        return
    if any(not is_unwritten_start(other) for other in await store.list_runs(run_id)):
        return
    await _discard_copy(store, run_id, _planned(copy.agent, run_id))


async def _copy_conversation(store: SessionStore, run: RunRecord, session_id: str, branched_at: str | None) -> None:
    """A new session `session_id` of the caller's holding the run's conversation before its input (with
    `branched_at`: through the run's end)."""
    caller = current_principal()
    source = await store.get_session(run.session_id)
    origin = {"response_id": branched_at} if branched_at is not None else {}
    await store.create_session(
        session_id,
        run.agent,
        dict(source.metadata) if source is not None else None,
        owner_id=caller.id,
        owner_name=caller.name,
        forked_from={
            "session_id": run.session_id,
            "run_id": run.run_id,
            "forked_at": datetime.now(UTC).isoformat(),
            "forked_by": caller.id,
            **origin,
        },
    )
    first, last = run_seq_range(run.ordinal)
    position = 0
    continuation: str | None = None
    while True:
        page = await store.list_messages(run.session_id, up_to_seq=first - 1 if branched_at is None else last,
                                         limit=COPY_BATCH, continuation=continuation)
        copies = [_copy(record, session_id, position + i) for i, record in enumerate(page.items)]
        if copies:
            await store.append_messages(session_id, copies)
        position += len(copies)
        continuation = page.continuation
        if not continuation:
            return


def _copy(record: MessageRecord, session_id: str, seq: int) -> MessageRecord:
    return record.model_copy(update={"session_id": session_id, "seq": seq, "created_at": None})
