"""The life of a run over HTTP, one copy for agent runs and workflow runs (`runs`, `workflows`).

- starting: the caller's session (`open_run_session`), the `Idempotency-Key` (`claim_start`; a check after it that
  fails gives it up, `or_undo`), the run record and its orchestration (`create_and_start`: a run whose orchestration
  could not be started is abandoned, so it does not hold its session; one whose record was written by a create that
  failed all the same is started);
- answering a start or a poll: the cursor of a continuation token (`poll_cursor`) and the long-poll wait
  (`wait_for_view`: until the run finishes, needs a person, or - for a poll - has something new);
- cancelling: the flag in the store, then the cancel event (`cancel`).

Closing a run in the store (its approvals expired, its session released) is `agent_runs.closing`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import azure.functions as func
from pydantic import BaseModel

from agent_runs import run_status
from agent_runs.closing import close_abandoned_run
from agent_runs.conversation_cache import ConversationCache
from agent_runs.services import RunServices
from agent_runs.starting import SessionAgentMismatchError, SessionNotOwnedError, open_session
from agent_runtime.agents import AgentDefinition
from http_api import idempotency
from http_api.caller import current_principal
from http_api.durable_gateway import OrchestrationState
from http_api.idempotency import Claim
from http_api.polling import long_poll
from http_api.problems import ApiProblem, not_found
from http_api.refusals import read_refusal
from http_api.request_context import verify_token
from session_store import ConflictError, RunRecord, SessionStore, StoreError, StoreUnavailableError
from session_store.rules import is_unwritten_start

log = logging.getLogger(__name__)

StateT = TypeVar("StateT")
T = TypeVar("T")


class PolledView(Protocol):
    """What the wait needs of a view: its status (`RunView`, `WorkflowRunView`)."""

    @property
    def status(self) -> str: ...


ViewT = TypeVar("ViewT", bound=PolledView)


class StateReader(Protocol):
    """A gateway that reads an orchestration's state, None if there is no such orchestration (`DurableGateway`,
    `WorkflowGateway`)."""

    async def state(self, instance_id: str, /) -> OrchestrationState[Any] | None: ...


class CancelSender(StateReader, Protocol):
    """A gateway that also raises an orchestration's cancel event."""

    async def send_cancel(self, instance_id: str, reason: str, /) -> object: ...


# ----------------------------------------------------------------------------------------------------- starting


async def open_run_session(store: SessionStore, session_id: str | None, agent: AgentDefinition) -> str:
    """The caller's session for a run, created if absent (a new one without `session_id`): another principal's
    session is a 404, as if missing; a conversation with another agent is a 409."""
    session_id = session_id or uuid.uuid4().hex
    caller = current_principal()
    try:
        await open_session(store, session_id, agent, owner_id=caller.id, owner_name=caller.name)
    except SessionNotOwnedError as error:
        raise not_found("session_not_found", "Session", session_id, field="body.session_id") from error
    except SessionAgentMismatchError as error:
        raise ApiProblem(
            409, "session_agent_mismatch", "The session belongs to another agent", str(error), field="body.session_id"
        ) from error
    return session_id


@dataclass(frozen=True)
class RunStart:
    """A start request's new `run_id`, and what its `Idempotency-Key` (if any) said: `replay` is the run an earlier
    request with the same key and body started (answer with it, as a poll would); otherwise this request starts
    `run_id`."""

    store: SessionStore
    run_id: str
    claim: Claim | None = None
    replay: RunRecord | None = None
    written: RunRecord | None = None
    """The run (`run_id`) an earlier request with this key wrote but never started, which this request starts
    (`unstarted`): as the first request would have, with this record instead of a new one. Then `replay` is None."""

    async def unstarted(self, gateway: StateReader) -> RunRecord | None:
        """The replayed run, when this request is to start it: its record was written but its orchestration never
        started (the first request died in between, or failed unable to tell whether the record was written), that
        request is surely over (`idempotency.outlived`), and this request takes the start over (exactly one does).
        Then it starts the run as the first request would have (`create_and_start` with that record). A replay
        pays the read of the orchestration's state only when its run is unfinished and its claim that old."""
        run, claim = self.replay, self.claim
        if run is None or claim is None or run.finished or not idempotency.outlived(claim):
            return None
        if await gateway.state(run.run_id) is not None:
            return None
        return run if await idempotency.take_over(self.store, claim) else None

    async def release(self) -> None:
        """This request failed and provably wrote no run (`create_and_start` found it refused, or closed it in its
        place): the key may start a run again. A request that cannot tell keeps the claim: a retry answers with the
        run if it exists, and the claim is taken over once abandoned (`idempotency.claim_in`) if it does not."""
        if self.claim is not None:
            await idempotency.release(self.store, self.claim)


async def claim_start(
    req: func.HttpRequest, store: SessionStore, route: str, body: BaseModel, gateway: StateReader,
    on_abandoned: Callable[[Claim], Awaitable[None]] | None = None,
) -> RunStart:
    """Claim the request's `Idempotency-Key` for a new run id (`route` and `body` say what "the same request" is);
    a replay of a run written but never started is this request's to start (`RunStart.written`). `on_abandoned`:
    what to clear up of an earlier request with the key that died before writing its run (`idempotency.claim`)."""
    run_id = uuid.uuid4().hex
    key = idempotency.key_of(req)
    if key is None:
        return RunStart(store, run_id)
    request_fingerprint = idempotency.fingerprint(route, body.model_dump(mode="json"))
    claim = await idempotency.claim(store, current_principal(), key, request_fingerprint, run_id, on_abandoned)
    if claim.first:
        return RunStart(store, run_id, claim)
    start = RunStart(store, run_id, claim, replay=await idempotency.started_run(store, claim))
    written = await start.unstarted(gateway)
    return start if written is None else RunStart(store, written.run_id, claim, written=written)


async def or_undo(undo: Callable[[], Awaitable[None]], work: Awaitable[T]) -> T:
    """`work`, which writes nothing; if it fails, `undo` what the request did before (`RunStart.release`: its key
    given up, so a retry may start the run; a branch's copy discarded)."""
    try:
        return await work
    except Exception:
        await undo()
        raise


async def create_and_start(
    store: SessionStore,
    planned: RunRecord,
    create: Callable[[], Awaitable[RunRecord]],
    launch: Callable[[RunRecord, Callable[[], None]], Awaitable[None]],
    *,
    on_unclaimed: Callable[[], Awaitable[None]] | None = None,
    orchestrations: StateReader,
) -> RunRecord:
    """`create` the record of run `planned` (claiming its session), then `launch` its orchestration. A failure after
    the record exists abandons the run - unless `orchestrations` finds its orchestration started all the same (the
    host took the start, its answer was lost): then the run is answered as started, so no retry starts it again.
    A failed `create` may have been written all the same (an error after the store took the write, or its answer
    lost), or may still land (a write slower than its error): the store closes the start in the run's place unless
    the run is there (`close_unwritten_start`, create-if-absent, so of that record and the run's own write exactly
    one lands). Written, the run is launched as if `create` had answered; closed now, `on_unclaimed` runs (nothing
    was started, nor ever will be) and the error stands, as it does when a launch that failed before it asked for
    the orchestration (`launch` calls its second argument then) is abandoned; a failed close leaves both alone, so
    no retry with the same `Idempotency-Key` starts a second run. A run the store closed in place of an unwritten
    start before (`is_unwritten_start`) is never launched: 409 `session_busy`, key given up."""
    try:
        run = await create()
    except Exception as error:
        # Only on a failure (a success pays nothing more). A refusal (busy, not found, ...) wrote nothing and never
        # will: a read tells whether the run is there all the same, as a retried create may have found it.
        if _refused(error):
            found, closed = await store.get_run(planned.run_id), False
        else:
            found, closed = await store.close_unwritten_start(planned)
        if found is None or closed:
            if on_unclaimed is not None:
                await on_unclaimed()
            raise
        run = found
        if not is_unwritten_start(run):
            log.warning("run %s was stored though creating it failed: starting it", planned.run_id, exc_info=True)
    if is_unwritten_start(run):
        # Its claim of the session was taken for a dead start's and closed before its run was written (the store's
        # `begin_run`): nothing was started, and the session went on without it.
        if on_unclaimed is not None:
            await on_unclaimed()
        raise ApiProblem(
            409, "session_busy", "The session has an active run",
            "This start took too long to store its run, and the session went on without it; start again.",
            field="body.session_id",
        )
    # `launch` says when it asks the host to start the orchestration: from then on the orchestration may start
    # however the request ends (a request slower than its timeout, an answer lost).
    submitted: list[bool] = []
    try:
        await launch(run, lambda: submitted.append(True))
    except Exception:
        if await _started_after_all(orchestrations, run.run_id):
            log.warning("run %s started though starting its orchestration failed", run.run_id, exc_info=True)
            return run
        if await abandon(store, run) and not submitted and on_unclaimed is not None:
            # Closed before its orchestration was even asked for (its input's write failed: a 503 that says to
            # retry), it never runs: the request started nothing, so its key may start the run afresh. Once asked
            # for, the orchestration may start late and its first step act before it reads the run closed: the key
            # keeps answering with the run given up, so no retry with it runs the turn a second time.
            await on_unclaimed()
        raise
    return run


async def _started_after_all(orchestrations: StateReader, run_id: str) -> bool:
    """Whether the orchestration of a run whose start failed exists (only read on that failure). A read that fails
    too counts as "not started": the run is abandoned, and an orchestration that starts later all the same finds its
    run closed and asks its model nothing (`activities.model`)."""
    try:
        return await orchestrations.state(run_id) is not None
    except Exception as error:
        log.warning("could not tell whether run %s started after its start failed: %s", run_id, error)
        return False


def _refused(error: Exception) -> bool:
    """The start was refused (by the store's rules, or the request's own checks): none of its writes is on its way."""
    return isinstance(error, ApiProblem | ValueError) or (
        isinstance(error, StoreError) and not isinstance(error, StoreUnavailableError)
    )


START_FAILED = "start_failed"
"""The error code of a run `abandon` closed: its orchestration never started."""


def start_failed(run: RunRecord) -> bool:
    """Whether `run` is one `abandon` closed: no orchestration of it was found, and its start answered with an error
    (so the openai SDK's retry of that start starts afresh rather than answering with the failure; an orchestration
    the host started all the same ends at its first model call without asking the model)."""
    return run.status == "failed" and (run.error or {}).get("code") == START_FAILED


async def abandon(store: SessionStore, run: RunRecord) -> bool:
    """A start that failed after claiming the session: end the run as failed so that it does not hold the session.
    Best effort: the store may be what failed (then the next start in that session reconciles the run instead).
    Whether the run is closed so (it then never runs: see `start_failed`)."""
    try:
        closed = await store.finish_run(
            run.run_id, "failed", error={"code": START_FAILED, "message": "could not start"}
        )
    except Exception:
        log.warning("could not mark run %s as failed after its start failed", run.run_id, exc_info=True)
        return False
    return start_failed(closed)


# ---------------------------------------------------------------------------------------------------- answering


def poll_cursor(services: RunServices, token: str | None, scope: str, run_id: str) -> int | None:
    """The position a poll's continuation token carries (None without a token); a bad token is a 401."""
    cursor = verify_token(services, token, scope, run_id)
    seq = cursor.get("seq") if cursor else None
    return seq if isinstance(seq, int) else None


async def wait_for_view(
    wait_seconds: float,
    read_state: Callable[[], Awaitable[StateT]],
    build: Callable[[StateT], Awaitable[ViewT]],
    *,
    final_statuses: frozenset[str],
    news: Callable[[ViewT], bool] | None = None,
    on_timeout: Callable[[ViewT, StateT], Awaitable[ViewT]] | None = None,
) -> ViewT:
    """Wait up to `wait_seconds` for the run to finish or need a person (`requires_action`) - and, for a poll, which
    passes `news`, for anything new - then answer with its view (`polling.long_poll`)."""

    def answer_now(view: ViewT) -> bool:
        status = view.status
        return status in final_statuses or status == "requires_action" or (news is not None and news(view))

    return await long_poll(wait_seconds, read_state, build, answer_now, on_timeout)


# --------------------------------------------------------------------------------------------------- cancelling


def _ended_by_its_flag(run: RunRecord) -> bool:
    return run.status == "cancelled" and run.cancel_requested_at is not None


async def cancel(
    store: SessionStore,
    gateway: CancelSender,
    run: RunRecord,
    reason: str,
    *,
    conversations: ConversationCache | None = None,
) -> RunRecord | None:
    """Flag the run's cancel in the store (what its steps check; the first request's time stays), then raise its
    cancel event. The flag is the cancel: a run flagged while open ends `cancelled` (`rules.finish`), whichever of
    the event and its step in flight reaches its orchestration first. Returns None once the cancel is flagged and its
    orchestration told (or not started yet), or the run as it ended when it finished after `run` was read and before
    the flag (nothing left to cancel). `conversations`: this process's conversation cache, kept valid across the flag
    (the run's closing step then reads no messages)."""
    if run.cancel_requested_at is None:
        try:
            finished = await run_status.flag_cancel(
                store, run, datetime.now(UTC), reason=reason, conversations=conversations
            )
        except ConflictError as error:  # the run changed under every attempt: a passing state, the client retries
            raise ApiProblem(
                503, "run_busy", "The run is changing too fast to flag its cancel",
                "Retry the cancel shortly: nothing was cancelled yet.", headers={"Retry-After": "1"},
            ) from error
        if finished is not None:  # its orchestration may still be running its last step: no event for it
            return finished
    try:
        await gateway.send_cancel(run.run_id, reason)
    except Exception:
        # A run that finished since it was read has an orchestration that refuses events (the SDK raises on the
        # host's 410). Flagged before it finished, it ended `cancelled` by this cancel (or a concurrent one): done.
        # Otherwise the cancel came too late, which is the caller's 409, not a server error.
        refusal = await read_refusal(lambda: gateway.state(run.run_id), lambda: store.get_run(run.run_id))
        if refusal.run is None:  # deleted meanwhile (with its session): nothing is left to cancel or to close
            return None
        if refusal.finished is not None:
            return None if _ended_by_its_flag(refusal.finished) else refusal.finished
        # A run whose start request has stored its record but not yet started its orchestration (the host's 404):
        # the flag is the cancel, read by the run's first step (`take_turn`, `call_model`) or, for a workflow, rung
        # by its start request (`workflows.start_workflow`).
        if refusal.state is None:
            return None
        if refusal.running:  # the flag stands (the run ends cancelled); its event is repaired by a retry or a poll
            log.warning("cancel of run %s is flagged but was not delivered", run.run_id, exc_info=True)
            raise ApiProblem(
                503, "cancel_not_delivered", "The cancel is flagged but the run has not been told yet",
                "The cancel stands (the run ends cancelled); send the same request again so that it stops now.",
                headers={"Retry-After": "1"},
            ) from None
        # Open, but its orchestration has ended: a rewind reopened it and its continuation never started (the host
        # died in between, or the rewind is still on its way to start it). Nothing would ever close it nor free
        # its session, so the cancel closes it; a continuation started after this reads the flag and ends at once.
        await close_abandoned_run(store, refusal.run, "cancelled", {"code": "cancelled", "message": reason})
    return None
