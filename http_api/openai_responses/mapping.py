"""A run, as the Responses API shows it: one Response object per turn (pure; the handlers gather the inputs).

Turns: a run pauses when it asks for approvals; each batch of approval requests ends a turn, which is `completed`
with `mcp_approval_request` items (as OpenAI's responses do). Output items belong to the turn in which they appear:
a message at its seq; a tool call that needed no approval at its call's seq; an approved (or rejected, or expired)
call at its decision's seq, in the turn after the request. A turn's usage is its own model calls' (as each of
OpenAI's responses reports its own, and clients such as the Agents SDK add them up): the turns of a run sum to its
total.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agent_runs.stored_usage import calls_usage
from agent_runtime.conversation import input_message_id
from agent_runtime.messages import Message, Usage
from agent_runtime.overrides import RunOverrides
from http_api.openai_responses.hosted_tools import declared_tools
from http_api.openai_responses.ids import ResponseRef
from http_api.openai_responses.models import (
    FINAL_RESPONSE_STATUSES,
    ApprovalResponseOut,
    IncompleteDetails,
    InputItem,
    InputMessageOut,
    McpApprovalRequest,
    McpCall,
    McpToolExecutionError,
    MessageOutput,
    OutputItem,
    OutputText,
    ResponseError,
    ResponseObject,
    ResponseStatus,
    ResponseUsage,
)
from session_store import ApprovalRecord, MessageRecord, RunRecord

LENGTH_FINISH = "length"
RATE_LIMIT_CODES = frozenset({"model_http_429", "rate_limited"})


def message_item_id(message_id: str) -> str:
    """The output item id of a stored assistant message (a streamed draft has the same id as its answer)."""
    return f"msg_{message_id}"


@dataclass(frozen=True)
class RunSnapshot:
    """What the mapping needs of a run, read at one moment (see `snapshots.read_snapshot`)."""

    run: RunRecord
    status: str  # the run's status (queued, in_progress, requires_action, completed, failed, cancelled)
    messages: list[MessageRecord]  # the run's visible messages, in seq order
    approvals: list[ApprovalRecord]  # every approval of the run
    usage: Usage
    waiting_on: list[str] = field(default_factory=list)  # approvals the run is waiting for
    finish_reason: str | None = None
    previous_response_id: str | None = None  # of the first turn: the session's previous run, if any


@dataclass
class _Placed:
    seq: int
    item: OutputItem


@dataclass
class _Calls:
    """What the run's messages say about each tool call, by call id."""

    calls: dict[str, tuple[str, Any]] = field(default_factory=dict)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    requested: dict[str, str] = field(default_factory=dict)  # call id -> approval id


def _arguments(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _result_text(result: dict[str, Any]) -> str | None:
    value = result.get("result")
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _index(messages: list[MessageRecord]) -> _Calls:
    index = _Calls()
    for record in messages:
        for content in record.payload.get("contents", []):
            kind = content.get("type")
            if kind == "function_call":
                index.calls[content["call_id"]] = (content["name"], content.get("arguments", {}))
            elif kind == "function_result":
                index.results[content["call_id"]] = content
            elif kind == "function_approval_request":
                index.requested[content["function_call"]["call_id"]] = content["id"]
    return index


def _mcp_call(server: str, call_id: str, index: _Calls, approval_id: str | None = None) -> McpCall:
    name, arguments = index.calls.get(call_id, ("", {}))
    result = index.results.get(call_id)
    error = result.get("error") if result else None
    status = "calling" if result is None else ("failed" if error else "completed")
    return McpCall(
        id=f"mcp_{call_id}",
        server_label=server,
        name=name,
        arguments=_arguments(arguments),
        output=_result_text(result) if result and not error else None,
        error=McpToolExecutionError.of(str(error)) if error else None,
        status=status,
        approval_request_id=approval_id,
    )


def _placed_items(snapshot: RunSnapshot) -> tuple[list[_Placed], list[int]]:
    """Every output item of the run with the seq where it appears, and the last seq of each approval batch."""
    server = snapshot.run.agent
    index = _index(snapshot.messages)
    placed: list[_Placed] = []
    batch_ends: list[int] = []
    previous_was_request = False
    for record in snapshot.messages:
        contents = record.payload.get("contents", [])
        is_request = False
        for content in contents:
            kind = content.get("type")
            if kind == "function_approval_request":
                is_request = True
                call = content["function_call"]
                placed.append(
                    _Placed(
                        record.seq,
                        McpApprovalRequest(
                            id=content["id"],
                            server_label=server,
                            name=call["name"],
                            arguments=_arguments(call.get("arguments", {})),
                        ),
                    )
                )
            elif kind == "function_approval_response":
                call_id = content["function_call"]["call_id"]
                placed.append(_Placed(record.seq, _mcp_call(server, call_id, index, content["id"])))
            elif kind == "function_call" and content["call_id"] not in index.requested:
                placed.append(_Placed(record.seq, _mcp_call(server, content["call_id"], index)))
        if record.role == "assistant" and not record.message_id.startswith(f"{snapshot.run.run_id}:input:"):
            text = Message.model_validate(record.payload).text
            if text:
                # The message first: its text came before the calls it made.
                at = len(placed) - sum(
                    1 for c in contents if c.get("type") == "function_call" and c["call_id"] not in index.requested
                )
                placed.insert(
                    at,
                    _Placed(
                        record.seq,
                        MessageOutput(id=message_item_id(record.message_id), content=[OutputText(text=text)]),
                    ),
                )
        if is_request:
            if previous_was_request:
                batch_ends[-1] = record.seq
            else:
                batch_ends.append(record.seq)
        previous_was_request = is_request
    if batch_ends and _cancelled_unanswered(snapshot, batch_ends[-1]):
        batch_ends.pop()
    return placed, batch_ends


def _cancelled_unanswered(snapshot: RunSnapshot, batch_end: int) -> bool:
    """The run was cancelled while the client held the turn that asked for approvals, and nothing happened after:
    that turn is the one cancelled (no later turn the client never saw, which its previous_response_id could not
    continue from)."""
    if snapshot.status != "cancelled":
        return False
    asked = {
        content["id"]
        for record in snapshot.messages
        if record.seq <= batch_end
        for content in record.payload.get("contents", [])
        if content.get("type") == "function_approval_request"
    }
    if any(a.approval_id in asked and a.status in ("approved", "rejected") for a in snapshot.approvals):
        return False
    return not any(r.seq > batch_end and r.role == "assistant" for r in snapshot.messages)


def turn_count(snapshot: RunSnapshot) -> int:
    """How many turns the run has so far (the last one may still be going on)."""
    return len(_placed_items(snapshot)[1]) + 1


def _timestamp(value: datetime | None) -> int:
    """Unix seconds, as OpenAI's `created_at` / `completed_at` (integers)."""
    return int(value.timestamp()) if value is not None else 0


def _text_config(overrides: RunOverrides) -> dict[str, Any]:
    fmt = overrides.response_format
    if fmt is None:
        return {"format": {"type": "text"}}
    if fmt.type == "json_object":
        return {"format": {"type": "json_object"}}
    return {"format": {"type": "json_schema", "name": fmt.name, "schema": fmt.json_schema, "strict": fmt.strict}}


def run_error(code: str, message: str) -> ResponseError:
    """OpenAI's error codes are a closed set: ours travels at the start of the message (`<code>: <message>`)."""
    openai_code = "rate_limit_exceeded" if code in RATE_LIMIT_CODES else "server_error"
    return ResponseError(code=openai_code, message=f"{code}: {message}" if message else code)


def _final_status(snapshot: RunSnapshot) -> tuple[ResponseStatus, ResponseError | None, IncompleteDetails | None]:
    run = snapshot.run
    if snapshot.status == "failed":
        error = run.error or {}
        return "failed", run_error(str(error.get("code", "run_failed")), str(error.get("message", ""))), None
    if snapshot.status == "cancelled":
        return "cancelled", None, None
    if snapshot.finish_reason == LENGTH_FINISH:
        return "incomplete", None, IncompleteDetails(reason="max_output_tokens")
    return "completed", None, None


def build_response(snapshot: RunSnapshot, ref: ResponseRef, *, background: bool | None = None) -> ResponseObject | None:
    """Turn `ref.turn` of the run, or None if the run has not got that far."""
    run = snapshot.run
    overrides = RunOverrides.from_record(run.overrides)
    placed, batch_ends = _placed_items(snapshot)
    turns = len(batch_ends) + 1
    if ref.turn > turns or _not_answered_yet(snapshot, ref.turn, batch_ends):
        return None
    low = batch_ends[ref.turn - 2] if ref.turn >= 2 else -math.inf
    high = batch_ends[ref.turn - 1] if ref.turn <= len(batch_ends) else math.inf
    output: list[OutputItem] = [p.item for p in placed if low < p.seq <= high]
    error: ResponseError | None = None
    incomplete: IncompleteDetails | None = None
    status: ResponseStatus
    if ref.turn < turns:
        status = "completed"  # the turn ended with approval requests
    elif snapshot.status in ("queued", "in_progress"):
        status = snapshot.status  # type: ignore[assignment]
    elif snapshot.status == "requires_action":
        by_id = {a.approval_id: a for a in snapshot.approvals}
        waiting = [by_id[a] for a in snapshot.waiting_on if a in by_id]
        if waiting and all(a.status == "pending" for a in waiting):
            status = "completed"  # waiting for the client: list what it still has to answer
            shown = {item.id for item in output if isinstance(item, McpApprovalRequest)}
            output += [
                McpApprovalRequest(
                    id=a.approval_id, server_label=run.agent, name=a.tool, arguments=_arguments(a.arguments)
                )
                for a in waiting
                if a.approval_id not in shown
            ]
        else:
            status = "in_progress"  # a decision is on its way to the run
    else:
        status, error, incomplete = _final_status(snapshot)
    usage = _turn_usage(snapshot, low, high if ref.turn < turns else None)
    return ResponseObject(
        id=ref.response_id,
        created_at=_created_at(snapshot, ref.turn, batch_ends),
        completed_at=_completed_at(snapshot, ref.turn, batch_ends) if status in FINAL_RESPONSE_STATUSES else None,
        status=status,
        background=background,
        error=error,
        incomplete_details=incomplete,
        instructions=overrides.instructions,
        model=run.agent,
        output=output,
        previous_response_id=(
            ResponseRef(run.run_id, ref.turn - 1).response_id if ref.turn > 1 else snapshot.previous_response_id
        ),
        text=_text_config(overrides),
        tools=declared_tools(overrides.tools, run.agent),
        usage=ResponseUsage(
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, total_tokens=usage.total_tokens
        ),
        metadata={k: str(v) for k, v in run.metadata.items()},
    )


def _calls_usage(snapshot: RunSnapshot, low: float, high: float) -> Usage:
    """The usage of the model calls whose answers are stored in (low, high] (`calls_usage`: each call's once)."""
    return calls_usage(snapshot.run.run_id, (r for r in snapshot.messages if low < r.seq <= high))


def _turn_usage(snapshot: RunSnapshot, low: float, high: float | None) -> Usage:
    """An earlier turn's: its calls'. The latest (`high` None): the run's total less the earlier turns', so it
    also carries what no stored answer shows (failed calls that were billed)."""
    if high is not None:
        return _calls_usage(snapshot, low, high)
    earlier, total = _calls_usage(snapshot, -math.inf, low), snapshot.usage
    return Usage(
        input_tokens=max(0, total.input_tokens - earlier.input_tokens),
        output_tokens=max(0, total.output_tokens - earlier.output_tokens),
        total_tokens=max(0, total.total_tokens - earlier.total_tokens),
    )


def _not_answered_yet(snapshot: RunSnapshot, turn: int, batch_ends: list[int]) -> bool:
    """The run waits for decisions on the batch that ended turn - 1 and none is made yet: turn `turn` starts with
    the first (the client's `mcp_approval_response`, or an approver's decision elsewhere); before it, it is a
    response nobody created (its id is only known ahead), not one listing the same requests again."""
    if turn < 2 or turn != len(batch_ends) + 1 or snapshot.status != "requires_action":
        return False
    return all(a.status == "pending" for a in _batch_approvals(snapshot, turn - 1, batch_ends))


def _batch_approvals(snapshot: RunSnapshot, turn: int, batch_ends: list[int]) -> list[ApprovalRecord]:
    """The approvals requested in turn `turn` (its batch), in request order."""
    if turn < 1 or turn > len(batch_ends):
        return []
    low = batch_ends[turn - 2] if turn >= 2 else -math.inf
    ids = [
        content["id"]
        for record in snapshot.messages
        if low < record.seq <= batch_ends[turn - 1]
        for content in record.payload.get("contents", [])
        if content.get("type") == "function_approval_request"
    ]
    by_id = {a.approval_id: a for a in snapshot.approvals}
    return [by_id[i] for i in ids if i in by_id]


def batch_of(snapshot: RunSnapshot, approval_id: str) -> int | None:
    """The turn whose batch requested `approval_id` (None if it is not one of the run's visible requests)."""
    _, batch_ends = _placed_items(snapshot)
    for turn in range(1, len(batch_ends) + 1):
        if any(a.approval_id == approval_id for a in _batch_approvals(snapshot, turn, batch_ends)):
            return turn
    return None


def _completed_at(snapshot: RunSnapshot, turn: int, batch_ends: list[int]) -> int:
    """When the turn ended: its approval requests were made, or the run finished."""
    if turn <= len(batch_ends) or not snapshot.run.finished:
        asked = [a.created_at for a in _batch_approvals(snapshot, turn, batch_ends) if a.created_at is not None]
        if not asked:  # the requests the run waits on (the last turn, answered by the client next)
            waiting = set(snapshot.waiting_on)
            asked = [a.created_at for a in snapshot.approvals if a.approval_id in waiting and a.created_at is not None]
        if asked:
            return _timestamp(max(asked))
    return _timestamp(snapshot.run.updated_at or snapshot.run.created_at)


def _created_at(snapshot: RunSnapshot, turn: int, batch_ends: list[int]) -> int:
    if turn == 1:
        return _timestamp(snapshot.run.created_at)
    decided = [a.decided_at for a in _batch_approvals(snapshot, turn - 1, batch_ends) if a.decided_at is not None]
    return _timestamp(min(decided)) if decided else _timestamp(snapshot.run.created_at)


def input_items(snapshot: RunSnapshot, ref: ResponseRef) -> list[InputItem]:
    """What the client sent for this turn, oldest first: the run's input messages for the first turn, the decisions
    on the previous turn's approval requests for the later ones."""
    run_id = snapshot.run.run_id
    if ref.turn == 1:
        prefix = input_message_id(run_id, 0).rsplit(":", 1)[0] + ":"
        items: list[InputItem] = []
        for record in snapshot.messages:
            if not record.message_id.startswith(prefix):
                continue
            role = record.payload.get("role")
            parts = [
                {"type": "input_text", "text": c.get("text", "")}
                for c in record.payload.get("contents", [])
                if c.get("type") == "text"
            ]
            items.append(
                InputMessageOut(
                    id=f"msg_{record.message_id}",
                    role=role if role in ("user", "system", "assistant") else "user",
                    content=parts,
                )
            )
        return items
    _, batch_ends = _placed_items(snapshot)
    return [
        ApprovalResponseOut(
            id=f"mcpr_{a.approval_id}",
            approval_request_id=a.approval_id,
            approve=a.status == "approved",
            reason=a.reason,
        )
        for a in _batch_approvals(snapshot, ref.turn - 1, batch_ends)
        if a.status in ("approved", "rejected")
    ]
