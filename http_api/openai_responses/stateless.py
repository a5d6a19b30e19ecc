"""An input list that repeats a stored conversation (I/O around the pure `conversation.reconcile`): find the
conversation (the previous response's session, else the one the items' ids name), read it as the Responses API shows
it, and keep only the new items; the request then continues the conversation's latest response."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from agent_runs.services import RunServices
from http_api.durable_gateway import DurableGateway
from http_api.openai_responses.conversation import Entry, reconcile
from http_api.openai_responses.errors import openai_error
from http_api.openai_responses.requests import CreateRequest
from http_api.openai_responses.snapshots import Conversation, conversation_of, previous_response_of
from http_api.problems import ApiProblem
from http_api.run_lifecycle import start_failed
from http_api.runs import run_or_404
from session_store import RunRecord

# Our message item ids: `msg_<run id>:...` (mapping.message_item_id, input items likewise).
_MESSAGE_ID = re.compile(r"^msg_([0-9a-f]{32}):")
MAX_RUNS_NAMED = 100  # distinct runs an input may name by its items' ids (a conversation's worth)
MAX_APPROVAL_LOOKUPS = 8  # approval ids read to find the conversation when no message id names it (bounded work)


# Whether a run is the one `request` would start (the same caller, input, instructions, format, tools, metadata).
SameStart = Callable[[RunRecord, CreateRequest], Awaitable[bool]]


async def resolve_input(
    services: RunServices,
    gateway: DurableGateway,
    request: CreateRequest,
    previous: RunRecord | None,
    retry_of: SameStart | None = None,
) -> RunRecord | None:
    """Keep the new items of `request` (`request.take`); chain it to the conversation its items repeat. `retry_of`
    (a retry of a request without a key): an input with nothing new that its first attempt's run explains - that
    run is returned, for the request to answer with; or, if that run could not be started, the request is what its
    first attempt was (`_restarted`)."""
    if not request.repeats:
        return None  # all new: taken by `parse_create`
    session_id = previous.session_id if previous is not None else await _session_named(services, request.entries)
    conversation = await conversation_of(services, gateway, session_id) if session_id else None
    reconciled = reconcile(request.entries, conversation.items if conversation else [])
    if (
        not reconciled.new
        and conversation is not None
        and retry_of is not None
        and (first_attempt := await _first_attempt(request, conversation, retry_of)) is not None
    ):
        if not start_failed(conversation.latest_run):
            return conversation.latest_run
        await _restarted(services, request, first_attempt, conversation.latest_run)
        return None
    request.take(reconciled.effective)
    if conversation is not None and previous is None:
        request.body.previous_response_id = conversation.latest.response_id
    return None


async def _first_attempt(
    request: CreateRequest, conversation: Conversation, retry_of: SameStart
) -> CreateRequest | None:
    """The request as its first attempt read it, if that attempt started the conversation's latest run: read against
    the conversation as it was before that run's input (what the first attempt saw), the request starts that run."""
    run = conversation.latest_run
    ours = f"msg_{run.run_id}:"
    at = next((i for i, item in enumerate(conversation.items) if (item.id or "").startswith(ours)), None)
    if at is None:
        return None
    first_attempt = CreateRequest(body=request.body.model_copy(), entries=request.entries, tools=request.tools)
    try:
        first_attempt.take(reconcile(request.entries, conversation.items[:at]).effective)
    except ApiProblem:
        return None  # not a request that started a run there
    return first_attempt if not first_attempt.approvals and await retry_of(run, first_attempt) else None


async def _restarted(
    services: RunServices, request: CreateRequest, first_attempt: CreateRequest, failed: RunRecord
) -> None:
    """The retry of a first attempt whose run could not be started (`run_lifecycle.abandon`: the client got a 5xx)
    starts afresh, as that attempt read it: its new items, continuing the response before the failed run - a branch,
    as the failed run took the next place (its input is not in the branch's copy) - or, if there is none, a new
    conversation."""
    request.messages = first_attempt.messages
    request.body.previous_response_id = await previous_response_of(services, failed)


async def _session_named(services: RunServices, entries: list[Entry]) -> str | None:
    """The session the items' ids belong to (message ids name their run; else an approval request's id), checked
    as every route checks a run (the caller's own); 400 naming the item if they name several or one not found."""
    named: dict[str, Entry] = {}
    for entry in entries:
        match = _MESSAGE_ID.match(entry.id or "")
        if match and match.group(1) not in named:
            named[match.group(1)] = entry
    if not named:
        lookups = 0
        for entry in entries:
            approval_id = entry.id if entry.kind == "mcp_approval_request" else None
            if entry.approval is not None:
                approval_id = entry.approval.approval_request_id
            if not approval_id or lookups >= MAX_APPROVAL_LOOKUPS:
                continue
            lookups += 1
            record = await services.store.get_approval(approval_id)
            if record is not None:
                named[record.run_id] = entry
                break
    if len(named) > MAX_RUNS_NAMED:
        raise openai_error(400, f"The input names more than {MAX_RUNS_NAMED} responses.", param="input")
    sessions: dict[str, Entry] = {}
    for run_id, entry in named.items():
        try:
            run = await run_or_404(services.store, run_id)
        except ApiProblem as problem:
            raise _not_stored(entry) from problem
        if run.kind != "agent":
            raise _not_stored(entry)
        sessions.setdefault(run.session_id, entry)
    if len(sessions) > 1:
        second = list(sessions.values())[1]
        raise openai_error(
            400,
            f"Invalid '{second.param}': it belongs to another conversation than the items before it.",
            param=second.param,
            code="input_contradicts_conversation",
        )
    return next(iter(sessions), None)


def _not_stored(entry: Entry) -> ApiProblem:
    named = entry.id or (entry.approval.approval_request_id if entry.approval is not None else "")
    return openai_error(
        400,
        f"Invalid '{entry.param}': no stored item '{named}' (its conversation was deleted, or is not yours).",
        param=entry.param,
        code="input_item_not_found",
    )
