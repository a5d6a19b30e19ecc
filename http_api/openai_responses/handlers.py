"""The Responses routes (`/api/v1/responses...`): the same runs, approvals and cancel as the rest of the API.

A new response starts a run through `runs.start_agent_run`; an `mcp_approval_response` input decides through
`approvals.record_decision` (same approver rules, timeouts and idempotent retries) and the SAME run continues as the
next turn; a `previous_response_id` of an earlier response branches the conversation (`_branch`: the fork's copy,
`fork.copy_for`); cancel is `runs.request_cancel`; delete is `sessions.delete_idle_session`. Without `background` a
create waits for the turn to end, up to `MAX_WAIT_SECONDS` (below the Functions HTTP limit of 230 s), then answers
with the response as it is (`in_progress`: poll it with GET). With `stream` (create, or GET with `stream=true`) the
answer is the response's events (`stream`), after the same checks.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

import azure.durable_functions as df
import azure.functions as func
from azurefunctions.extensions.http.fastapi import StreamingResponse

from agent_runs.contracts import RunProgress
from agent_runs.services import RunServices
from agent_runtime.agents import AgentDefinition, UnknownAgentError
from agent_runtime.check_threads import check_off_loop
from agent_runtime.messages import Message
from http_api.access import decidable_approval
from http_api.adapter import json_response, read_json_body
from http_api.approvals import record_decision, same_decision
from http_api.caller import current_principal
from http_api.durable_gateway import DurableGateway, OrchestrationState
from http_api.fork import copy_for, discard_abandoned_copy, run_input
from http_api.models import FINAL_STATUSES, ApprovalDecisionRequest
from http_api.openai_responses.errors import openai_endpoint, openai_error, unsupported
from http_api.openai_responses.hosted_tools import tool_policy
from http_api.openai_responses.ids import ResponseRef, parse_response_id
from http_api.openai_responses.includes import check_include, query_include
from http_api.openai_responses.mapping import batch_of, build_response, input_items, turn_count
from http_api.openai_responses.models import (
    FINAL_RESPONSE_STATUSES,
    DeletedResponse,
    InputItemList,
    InputItemsQuery,
    ResponseObject,
    RetrieveQuery,
)
from http_api.openai_responses.requests import CreateRequest, RawBody, parse_create, parse_query
from http_api.openai_responses.sdk_retry import first_attempt_not_before, is_sdk_retry
from http_api.openai_responses.snapshots import previous_response_of, read_snapshot
from http_api.openai_responses.stateless import SameStart, resolve_input
from http_api.openai_responses.stream import open_response_stream
from http_api.polling import long_poll
from http_api.problems import ApiProblem
from http_api.run_lifecycle import RunStart, claim_start, or_undo, start_failed
from http_api.runs import request_cancel, run_or_404, start_agent_run
from http_api.sessions import delete_session_and_runs, session_or_404
from http_api.start_webhook import start_webhook
from notifications.http.webhook_field import checked_webhook
from session_store import RunRecord, SessionMovedOnError, SessionRecord
from telemetry.trace_context import RunTrace

# Azure's load balancer ends an HTTP request after 230 s whatever the function's timeout: answer a little before.
MAX_WAIT_SECONDS = 220
CANCEL_WAIT_SECONDS = 10  # how long a cancel waits for the run to stop before answering with its current state


# Create fields that only shape the answer: left out of what an `Idempotency-Key` calls "the same request".
ANSWER_SHAPING = ("stream", "background")

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------- reading a run


async def wait_for_turn(
    services: RunServices,
    gateway: DurableGateway,
    run: RunRecord,
    ref: ResponseRef,
    wait_seconds: float,
    *,
    background: bool | None = None,
    until_run_ends: bool = False,
) -> ResponseObject:
    """The turn's response once it has ended (`until_run_ends`: once the run has, if it is the run's last turn), or
    as it is after `wait_seconds`."""
    previous = await previous_response_of(services, run) if ref.turn == 1 else None

    async def build(state: OrchestrationState[RunProgress] | None) -> tuple[ResponseObject, bool]:
        snapshot = await read_snapshot(services, gateway, run, state, previous)
        response = build_response(snapshot, ref, background=background)
        if response is None:
            raise _response_not_found(ref.response_id)
        ended = response.status in FINAL_RESPONSE_STATUSES
        # The turn that asked for the approvals the run waits on is the one the client holds (it is answered next).
        if until_run_ends and ref.turn >= turn_count(snapshot) - 1:
            ended = snapshot.status in FINAL_STATUSES  # as the turn shows it (the record may know first)
        return response, ended

    response, _ = await long_poll(wait_seconds, lambda: gateway.state(run.run_id), build, lambda view: view[1])
    return response


def _response_not_found(response_id: str, param: str | None = None) -> Exception:
    return openai_error(404, f"Response with id '{response_id}' not found.", param=param, code="response_not_found")


async def _response_run(
    services: RunServices, response_id: str, param: str | None = None
) -> tuple[ResponseRef, RunRecord]:
    """The response's run, found as every route finds a run (`run_or_404`: the caller's own, else not found)."""
    ref = parse_response_id(response_id)
    if ref is None:
        raise _response_not_found(response_id, param)
    try:
        run = await run_or_404(services.store, ref.run_id)
    except ApiProblem as problem:
        raise _response_not_found(response_id, param) from problem
    if run.kind != "agent":
        raise _response_not_found(response_id, param)
    return ref, run


def _agent(services: RunServices, name: str) -> AgentDefinition:
    try:
        return services.agents.get(name)
    except UnknownAgentError as error:
        raise openai_error(
            404,
            f"The model '{name}' does not exist (models are the agents this app serves).",
            param="model",
            code="model_not_found",
        ) from error


def _response(response: ResponseObject) -> func.HttpResponse:
    return json_response(response.model_dump(mode="json"))


# ----------------------------------------------------------------------------------------------- routes


@openai_endpoint
async def create_response(
    req: func.HttpRequest, client: df.DurableOrchestrationClient
) -> func.HttpResponse | StreamingResponse:
    services = RunServices.current()
    raw = read_json_body(req, RawBody).model_dump()
    # Off the loop: validating up to 256 KB of body and checking a client's output schema (up to 64,000 characters,
    # ~0.15 s) is CPU work that would stall every other run and request of the worker.
    request = await check_off_loop(parse_create, raw)
    agent = _agent(services, request.body.model)
    request.tools = tool_policy(request.body.tools, agent)
    gateway = DurableGateway(client)
    # The key is claimed for the body as sent, before `resolve_input` reads it against the stored conversation: a
    # retry of a stateless input list finds its first attempt's input stored there, and is the same request all
    # the same. A branch's copy left by a request that died is found by its run's id (`discard_abandoned_copy`).
    start = await claim_start(req, services.store, "responses", _key_body(raw), gateway,
                              on_abandoned=lambda claim: discard_abandoned_copy(services.store, claim.result_id))
    if start.replay is not None:
        run, ref = start.replay, ResponseRef(start.replay.run_id)
    else:
        retry_of = _retry_of(services, req) if _retry_without_key(req, start) else None
        retried = None
        if stored_input := await _taken_over_input(services, start):
            request.messages = stored_input  # checked and resolved by the request that stored it: nothing can fail
        else:
            retried = await or_undo(start.release, _resolve(services, gateway, request, retry_of))
        if retried is not None:  # a stateless input list's retry: its first attempt's run
            run, ref = retried, ResponseRef(retried.run_id)
        elif request.approvals:  # the key starts no run: an answer is idempotent of its own (`record_decision`)
            await start.release()
            run, ref = await _answer_approvals(services, gateway, req, request, agent)
        else:
            run = await _start(services, gateway, request, agent, start, RunTrace.start(req.headers), retry_of)
            ref = ResponseRef(run.run_id)
    background = bool(request.body.background)
    if request.body.stream:
        return await open_response_stream(services, client, run, ref, background=background)
    wait = 0 if background else MAX_WAIT_SECONDS
    return _response(await wait_for_turn(services, gateway, run, ref, wait, background=background))


async def _taken_over_input(services: RunServices, start: RunStart) -> list[Message]:
    """The input an earlier request with the key stored for the run it wrote but never started, which this request
    starts (`RunStart.written`). A start is taken over only once, so nothing may fail before it: resolving the body
    again would read a stateless input list against the conversation that now holds that input ("adds nothing")."""
    return [] if start.written is None else await run_input(services.store, start.written)


def _key_body(raw: dict[str, Any]) -> RawBody:
    """What "the same request" is for an `Idempotency-Key`: the body as sent, without what only shapes the answer
    (as `wait_seconds` on `POST /api/runs`): a retry may stream, or not wait, where its first attempt did not."""
    return RawBody.model_validate({k: v for k, v in raw.items() if k not in ANSWER_SHAPING})


async def _resolve(
    services: RunServices, gateway: DurableGateway, request: CreateRequest, retry_of: SameStart | None
) -> RunRecord | None:
    """The request's new items, and the response it follows (a stateless input list's: its conversation's latest);
    or the run its first attempt started, when it is a retry of a stateless input list (`resolve_input`)."""
    previous_id = request.body.previous_response_id
    previous = (await _response_run(services, previous_id, "previous_response_id"))[1] if previous_id else None
    if (retried := await resolve_input(services, gateway, request, previous, retry_of)) is not None:
        return retried
    if request.approvals and not request.body.previous_response_id:
        raise openai_error(
            400, "mcp_approval_response items need the previous_response_id they answer.", param="previous_response_id"
        )
    return None


async def _start(
    services: RunServices,
    gateway: DurableGateway,
    request: CreateRequest,
    agent: AgentDefinition,
    start: RunStart,
    trace: RunTrace,
    retry_of: SameStart | None,
) -> RunRecord:
    """The new response's run: a new conversation, the next run of the previous response's, or a branch of it. With
    an `Idempotency-Key` the same request again answers with the run the first one started (as `POST /api/runs`);
    without one, the openai SDK's retry of a continuation answers with the run it started (`_retried_run`)."""
    # A take-over's body is its first request's (the same key): the webhook that request checked, not resolved again.
    webhook = await start_webhook(start, partial(_metadata_webhook, request.body.metadata))
    if start.written is not None:  # written by an earlier request with the key that never started it: as it was
        return await _started(services, gateway, agent, request, start, trace, webhook,
                              session_id=start.written.session_id)
    started = partial(_started, services, gateway, agent, request, start, trace, webhook)
    if not request.body.previous_response_id:
        return await started(session_id=None)
    ref, previous = await or_undo(start.release, _continuable(services, gateway, request, agent))
    return await _continue(services, retry_of, request, start, started, ref, previous)


async def _started(
    services: RunServices,
    gateway: DurableGateway,
    agent: AgentDefinition,
    request: CreateRequest,
    start: RunStart,
    trace: RunTrace,
    webhook: str | None,
    **where: Any,
) -> RunRecord:
    """`start`'s run of the request in the session `where` says (and how it claims it)."""
    where.setdefault("on_unclaimed", start.release)
    return await start_agent_run(
        services,
        gateway,
        agent,
        run_id=start.run_id,
        written=start.written,
        inputs=request.messages,
        metadata=dict(request.body.metadata or {}),
        overrides=request.overrides,
        trace=trace,  # the caller's W3C trace context, or a new trace rooted at the run
        webhook=webhook,
        **where,
    )


async def _continuable(
    services: RunServices, gateway: DurableGateway, request: CreateRequest, agent: AgentDefinition
) -> tuple[ResponseRef, RunRecord]:
    """The previous response, checked: the same model, a response a new input can follow (`_check_continuable`)."""
    previous_id = request.body.previous_response_id or ""
    ref, previous = await _response_run(services, previous_id, "previous_response_id")
    if previous.agent != agent.name:
        raise openai_error(
            400, f"Response '{previous_id}' is a conversation with model '{previous.agent}'.", param="model"
        )
    await _check_continuable(services, gateway, ref, previous)
    return ref, previous


async def _continue(
    services: RunServices,
    retry_of: SameStart | None,
    request: CreateRequest,
    start: RunStart,
    started: Callable[..., Awaitable[RunRecord]],
    ref: ResponseRef,
    previous: RunRecord,
) -> RunRecord:
    """The next run of the previous response's conversation; if that went on, the SDK retry's run or a branch."""
    session = await or_undo(start.release, services.store.get_session(previous.session_id))
    if session is None or _gone(session, previous):
        await start.release()
        raise _response_not_found(ref.response_id, "previous_response_id")
    if not _moved_on(session, previous.ordinal):
        unclaimed = _Noted()  # the key is released below unless the request branches with it
        try:
            # The new run must be the very next one of the session: the one after the previous response's run.
            return await started(session_id=previous.session_id, after_run_count=previous.ordinal,
                                 on_unclaimed=unclaimed)
        except SessionMovedOnError as moved_on:
            await or_undo(start.release, _check_superseded(services, ref, previous, moved_on))
            # Checked above, but another request continued the same response before this one claimed the session
            # (its run may even have finished): this run follows the response its client holds, on its own branch.
        except Exception:
            if unclaimed.called:
                await start.release()
            raise
    return await _retried_run(services, retry_of, request, previous, ref) or await _branch(
        services, previous, ref, start, started
    )


class _Noted:
    """An `on_unclaimed` that only notes the call: the caller decides what to do once it knows why."""

    called = False

    async def __call__(self) -> None:
        self.called = True


async def _check_superseded(
    services: RunServices, ref: ResponseRef, previous: RunRecord, moved_on: SessionMovedOnError
) -> None:
    """A continuation refused its claim of the session (it moved on): 404 if the conversation was deleted meanwhile
    (an empty one it re-created goes), 409 `session_busy` while a start there is still being stored."""
    session = await services.store.get_session(previous.session_id)
    if _gone(session, previous):
        await _discard_recreated(services, session)
        raise _response_not_found(ref.response_id, "previous_response_id") from moved_on
    if session is not None and await _held_by_an_unwritten_start(services, session, previous.ordinal):
        raise _session_busy() from moved_on


def _gone(session: SessionRecord | None, previous: RunRecord) -> bool:
    """The previous response's conversation was deleted (and maybe re-created empty under its id since)."""
    return session is None or session.run_count < previous.ordinal


async def _discard_recreated(services: RunServices, session: SessionRecord | None) -> None:
    """A continuation racing a DELETE of its conversation re-created it, empty, before its claim was refused: that
    empty session goes (best effort; it has no run, and is the caller's - another's, or one in use, is left)."""
    if session is None or session.run_count or session.active_run_id or session.queued_run_ids:
        return
    if session.owner_id != current_principal().id:
        return
    try:
        await services.store.delete_session(session.session_id)
    except Exception:
        log.warning("could not delete the empty session %s a continuation re-created", session.session_id,
                    exc_info=True)


async def _retried_run(
    services: RunServices,
    retry_of: SameStart | None,
    request: CreateRequest,
    previous: RunRecord,
    ref: ResponseRef,
) -> RunRecord | None:
    """The run an earlier attempt of this very request started, when this one is the openai SDK's retry of it (it
    sends `x-stainless-retry-count` > 0, and no Idempotency-Key; a request with a key is answered by its claim):
    the run right after the previous response's run in its conversation, or the first run of a branch the caller
    made from that response (`branched_from`: the first attempt found the conversation gone on, and branched), the
    most recent of them that is the one this request starts (`_same_start`, recent enough to be its first attempt's:
    `sdk_retry`). Anything else - a new input, or the same input sent again without the retry mark (a client asking
    for another answer) - branches. `retry_of`: the request's own check (`_retry_of`), None when it is no such retry."""
    if retry_of is None:
        return None
    runs = await services.store.list_runs(previous.session_id)
    following = [r for r in runs if r.ordinal == previous.ordinal + 1]
    # Only a retry asks (never a hot path): the caller's branches are sessions of their own (cross-partition).
    branches = await services.store.list_branch_runs(ref.response_id, owner_id=current_principal().id)
    for run in sorted([*following, *branches], key=_created, reverse=True):
        if not start_failed(run) and await retry_of(run, request):
            return run
    return None


def _created(run: RunRecord) -> datetime:
    return run.created_at or datetime.min.replace(tzinfo=UTC)


def _retry_without_key(req: func.HttpRequest, start: RunStart) -> bool:
    return start.claim is None and is_sdk_retry(req)


def _retry_of(services: RunServices, req: func.HttpRequest) -> SameStart:
    """Whether a run is the one this retry's first attempt started (`_same_start`), among runs recent enough to be it
    (`sdk_retry.first_attempt_not_before`)."""
    return partial(_same_start, services, first_attempt_not_before(req, datetime.now(UTC)))


async def _same_start(services: RunServices, not_before: datetime, run: RunRecord, request: CreateRequest) -> bool:
    """Whether `run` is the one `request` starts: the caller's, of its model, with exactly its input, instructions,
    format, tools and metadata, created no earlier than `not_before`."""
    if (
        _created(run) < not_before
        or run.kind != "agent"
        or run.agent != request.body.model
        or run.owner_id != current_principal().id
        or run.metadata != dict(request.body.metadata or {})
        or run.overrides != request.overrides.to_record()
    ):
        return False
    stored = await run_input(services.store, run)
    return [_bare(m) for m in stored] == [_bare(m) for m in request.messages]


def _bare(message: Message) -> Message:
    return message.model_copy(update={"message_id": None, "created_at": None})


async def _check_continuable(
    services: RunServices, gateway: DurableGateway, ref: ResponseRef, previous: RunRecord
) -> None:
    """A new input can follow the last turn of a run that has ended (the latest of its conversation, or an earlier
    one: a branch), never a turn inside a run (its approvals were answered, or timed out, and the run went on from
    it)."""
    snapshot = await read_snapshot(services, gateway, previous, await gateway.state(previous.run_id))
    latest = ResponseRef(previous.run_id, turn_count(snapshot))
    if ref.turn > latest.turn:
        raise _response_not_found(ref.response_id, "previous_response_id")
    if not snapshot.run.finished:
        waiting = snapshot.status == "requires_action"
        holds = ResponseRef(previous.run_id, latest.turn - 1) if waiting else latest  # the turn its client answers
        if ref.turn >= holds.turn:
            raise openai_error(
                400 if waiting else 409,
                f"Response '{holds.response_id}' is waiting for mcp_approval_response items: answer its approval "
                f"requests, or cancel it (POST /responses/{holds.response_id}/cancel) and go on from it."
                if waiting
                else f"Response '{latest.response_id}' is still in progress; wait for it or cancel it.",
                param="previous_response_id",
                code="previous_response_waiting" if waiting else "previous_response_in_progress",
            )
    if ref != latest:
        raise openai_error(
            400,
            f"Response '{ref.response_id}' asked for approvals, which were answered or timed out, and its run went "
            f"on as '{ref.next().response_id}': a conversation goes on (or branches) only from the last response of "
            "a run" + (f" ('{latest.response_id}')." if snapshot.run.finished else "."),
            param="previous_response_id",
            code="previous_response_mid_run",
        )


async def _branch(
    services: RunServices,
    previous: RunRecord,
    ref: ResponseRef,
    start: RunStart,
    started: Callable[..., Awaitable[RunRecord]],
) -> RunRecord:
    """Continue an earlier response of a conversation that went on, as OpenAI's API does: a new session of the
    caller's holding the conversation through the end of its run (the fork's copy, `copy_for`), the new run there.
    The original conversation is not touched."""
    if previous.ordinal == 0:  # queued, then ended before its turn: no place in the conversation to branch from
        await start.release()
        raise openai_error(400, f"Response '{ref.response_id}' never started: nothing can follow it.",
                           param="previous_response_id", code="previous_response_not_started")
    session_id, given_up = await copy_for(services.store, previous, start, branched_at=ref.response_id)
    # A DELETE of the conversation landing while it was copied leaves a copy of what was left: no branch of it.
    source = await or_undo(given_up, services.store.get_session(previous.session_id))
    if _gone(source, previous):
        await given_up()  # the copy goes, then the key is released
        raise _response_not_found(ref.response_id, "previous_response_id")
    return await started(session_id=session_id, on_unclaimed=given_up, branched_from=ref.response_id)


async def _held_by_an_unwritten_start(services: RunServices, session: SessionRecord, ordinal: int) -> bool:
    """Whether the session's next position is counted by a start whose run is not written (yet, or ever: the store
    closes such a start after a grace and gives its position back): no run follows the previous response yet, so
    the session is busy for now rather than the response superseded."""
    if not session.active_run_id or session.run_count != ordinal + 1:
        return False
    return await services.store.get_run(session.active_run_id, session_id=session.session_id) is None


def _session_busy() -> Exception:
    return openai_error(
        409,
        "The conversation's session is busy with a run being started; retry in a moment.",
        param="previous_response_id",
        code="session_busy",
    )


def _moved_on(session: SessionRecord, ordinal: int) -> bool:
    """Refused early: a run after the previous response's was written. A session held (counted one more) may be
    held by a start that died before its run was written, which is no run: the claim's `after_run_count` decides,
    once the store has closed it and given its position back (`rules.release_unwritten_start`)."""
    return session.run_count != ordinal and not (session.active_run_id and session.run_count == ordinal + 1)


async def _metadata_webhook(metadata: dict[str, Any] | None, *, resolve: bool = True) -> str | None:
    """`metadata.webhook`: the run's own webhook (notifications), in OpenAI's error shape when not allowed."""
    try:
        return await checked_webhook((metadata or {}).get("webhook"), "metadata.webhook", resolve=resolve)
    except ApiProblem as problem:
        raise openai_error(400, problem.detail or problem.title, param="metadata.webhook",
                           code="webhook_not_allowed") from problem


async def _answer_approvals(
    services: RunServices,
    gateway: DurableGateway,
    req: func.HttpRequest,
    request: CreateRequest,
    agent: AgentDefinition,
) -> tuple[RunRecord, ResponseRef]:
    """Decide the approvals through the approval path; the run that asked continues as the next turn."""
    _, run = await _response_run(services, request.body.previous_response_id or "", "previous_response_id")
    if run.agent != agent.name:
        raise openai_error(
            400, f"Response '{request.body.previous_response_id}' belongs to model '{run.agent}'.", param="model"
        )
    _same_as_run(request, run)
    snapshot = await read_snapshot(services, gateway, run, await gateway.state(run.run_id))
    turns = set()
    for index, item in request.approvals:
        turn = batch_of(snapshot, item.approval_request_id)
        if turn is None and any(a.approval_id == item.approval_request_id for a in snapshot.approvals):
            turn = turn_count(snapshot) - 1  # a request of a turn the run closed (cancelled): the decision says so
        if turn is None:
            raise openai_error(
                404,
                f"No approval request '{item.approval_request_id}' in response '{request.body.previous_response_id}'.",
                param=f"input[{index}].approval_request_id",
                code="approval_not_found",
            )
        turns.add(turn)
    if len(turns) > 1:
        raise openai_error(
            400, "The mcp_approval_response items answer requests of different responses.", param="input"
        )
    caller = current_principal()
    for index, item in request.approvals:
        decision = ApprovalDecisionRequest(decision="approve" if item.approve else "reject", reason=item.reason)
        try:
            # The same rules as the approvals route: who may decide, then one decision wins.
            run, record = await decidable_approval(services.store, run.run_id, item.approval_request_id)
            await record_decision(services, gateway, run, record, decision)
        except ApiProblem as problem:
            # The same answer again after the run went on (a client retrying): nothing to change, the same response.
            stored = await services.store.get_approval(item.approval_request_id)
            verdict = "approved" if item.approve else "rejected"
            same = stored is not None and same_decision(stored, verdict, caller.id, item.reason, None)
            if problem.status != 409 or not same:
                problem.field = f"input[{index}]"  # the item at fault (decided otherwise, expired, not yours...)
                raise
    return run, ResponseRef(run.run_id, turns.pop() + 1)


def _same_as_run(request: CreateRequest, run: RunRecord) -> None:
    """An answer to approvals continues a run: it cannot change the run's instructions, format or metadata."""
    body, overrides = request.body, request.overrides
    stored = overrides.from_record(run.overrides)
    if body.instructions is not None and body.instructions != stored.instructions:
        raise unsupported("instructions", "an answer to approval requests continues the run with its instructions")
    if body.text is not None and body.text.format is not None and overrides.response_format != stored.response_format:
        raise unsupported("text", "an answer to approval requests continues the run with its output format")
    if body.tools and overrides.tools != stored.tools:
        raise unsupported("tools", "an answer to approval requests continues the run with its tools")
    if body.metadata and {k: str(v) for k, v in run.metadata.items()} != body.metadata:
        raise unsupported("metadata", "an answer to approval requests continues the run with its metadata")


@openai_endpoint
async def get_response(
    req: func.HttpRequest, client: df.DurableOrchestrationClient
) -> func.HttpResponse | StreamingResponse:
    services = RunServices.current()
    query = parse_query(req, RetrieveQuery)
    check_include(query_include(req.url))
    if query.starting_after is not None and not query.stream:
        raise openai_error(400, "'starting_after' is only valid with stream=true.", param="starting_after")
    ref, run = await _response_run(services, req.route_params["response_id"])
    response = await wait_for_turn(services, DurableGateway(client), run, ref, 0)  # 404 for a turn not there yet
    if query.stream:
        return await open_response_stream(services, client, run, ref, starting_after=query.starting_after)
    return _response(response)


@openai_endpoint
async def cancel_response(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    services = RunServices.current()
    ref, run = await _response_run(services, req.route_params["response_id"])
    gateway = DurableGateway(client)
    if not (run.finished and run.status == "cancelled"):  # cancelling a cancelled response again is a no-op
        try:
            await request_cancel(services, client, run)
        except ApiProblem as refused:  # it ended since it was read: a no-op too if another cancel ended it
            current = await services.store.get_run(run.run_id)
            if refused.code != "run_finished" or current is None or current.status != "cancelled":
                raise
            run = current
    # The response the client holds shows the cancel (a turn that ended with approval requests, too).
    return _response(await wait_for_turn(services, gateway, run, ref, CANCEL_WAIT_SECONDS, until_run_ends=True))


@openai_endpoint
async def delete_response(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    """Deletes the conversation the response belongs to (the session: every response chained in it, and its runs'
    Durable history), as `DELETE /api/sessions/{id}` does; 409 while a run in it is active."""
    services = RunServices.current()
    ref, run = await _response_run(services, req.route_params["response_id"])
    try:
        session = await session_or_404(services.store, run.session_id)
    except ApiProblem as problem:
        raise _response_not_found(ref.response_id) from problem
    await delete_session_and_runs(services.store, client, session, cancel=False)
    return json_response(DeletedResponse(id=ref.response_id))


@openai_endpoint
async def list_input_items(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    services = RunServices.current()
    ref, run = await _response_run(services, req.route_params["response_id"])
    query = parse_query(req, InputItemsQuery)
    check_include(query_include(req.url))
    gateway = DurableGateway(client)
    snapshot = await read_snapshot(services, gateway, run, await gateway.state(run.run_id))
    if build_response(snapshot, ref) is None:
        raise _response_not_found(ref.response_id)
    items = input_items(snapshot, ref)
    if query.order == "desc":
        items.reverse()
    ids = [item.id for item in items]
    for cursor, param in ((query.after, "after"), (query.before, "before")):
        if cursor is not None and cursor not in ids:
            raise openai_error(400, f"No input item '{cursor}' in response '{ref.response_id}'.", param=param)
    start = ids.index(query.after) + 1 if query.after else 0
    end = ids.index(query.before) if query.before else len(items)
    page = items[start:end][: query.limit]
    body: dict[str, Any] = InputItemList(
        data=page,
        first_id=page[0].id if page else None,
        last_id=page[-1].id if page else None,
        has_more=start + len(page) < end,
    ).model_dump(mode="json")
    return json_response(body)
