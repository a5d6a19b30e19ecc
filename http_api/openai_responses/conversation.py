"""Stateless input lists (pure): an `input` array that repeats the items of earlier responses of a conversation.

The OpenAI Agents SDK's standard multi-turn sends the whole conversation again (`result.to_input_list()` plus the
new user message), and any client may work that way instead of chaining `previous_response_id`. `reconcile` walks
the client's items against the conversation as stored (`stored`: every turn's input and output items, oldest
first, as the Responses routes show them) and keeps only what is new:

- an item with one of our ids is the stored item of that id: it must say what the stored one says (else 400 naming
  `input[i]`) and come after the items already matched;
- an item without an id (a user message the SDK repeats) is recognised by content and position: it is the next
  stored message after the last matched item, or it is new;
- an `mcp_approval_response` repeats the decision stored for its request, or is new: it decides an open request, or
  the approval path refuses it (409 for a request decided otherwise, as for any decision); answers have no order
  among themselves (each names its request), only after the items of the turn before them;
- a `function_call` repeats the stored call of its call id and goes back with its `function_call_output` (a model
  turn's outputs complete, as OpenAI requires: one missing is its 400), before the next stored item;
- reasoning items carry nothing that takes effect here (this server produces none) and are skipped;
- once a new item came, no stored item may follow, and a conversation the client repeated must not have moved on
  past what it repeated (the client would be branching from an earlier point, which a durable session cannot do).

New items are user/system messages and `mcp_approval_response`s; everything else must be stored already.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from agent_runtime import json_limits
from http_api.openai_responses.errors import openai_error
from http_api.openai_responses.models import (
    ApprovalResponseItem,
    ApprovalResponseOut,
    InputItem,
    InputMessageOut,
    McpApprovalRequest,
    McpCall,
    MessageOutput,
    OutputItem,
)

StoredItem = OutputItem | InputItem
EntryKind = Literal[
    "message",
    "mcp_call",
    "mcp_approval_request",
    "mcp_approval_response",
    "mcp_list_tools",
    "reasoning",
    "function_call",
    "function_call_output",
]
# Kinds a client can only repeat (this server made them), never add.
REPEAT_ONLY = frozenset({"mcp_call", "mcp_approval_request", "function_call", "function_call_output"})


@dataclass(frozen=True)
class Entry:
    """One item of the client's `input`, parsed (`requests.parse_create`)."""

    index: int
    kind: EntryKind
    id: str | None = None
    role: str | None = None  # messages: user, system (developer is system), assistant
    text: str | None = None  # messages: the text parts, joined
    texts: tuple[str, ...] = ()
    name: str | None = None
    arguments: str | None = None
    output: str | None = None  # a call's output, if the client sent one
    call_id: str | None = None  # function_call / function_call_output
    approval: ApprovalResponseItem | None = None

    @property
    def param(self) -> str:
        return f"input[{self.index}]"


@dataclass
class Reconciled:
    new: list[Entry] = field(default_factory=list)
    repeated: int = 0  # client items recognised as stored ones
    decisions: list[Entry] = field(default_factory=list)  # mcp_approval_responses that repeat a stored decision

    @property
    def effective(self) -> list[Entry]:
        """What the request does: its new items, else the decisions it repeats (a client retrying an answer gets
        the response that answer gave, as before)."""
        return self.new or self.decisions


def _same_json(left: str | None, right: str | None) -> bool:
    if left == right:
        return True
    try:  # within the limits of JSON from outside: a client's arguments nested 100,000 deep are not the stored ones
        return json_limits.loads(left or "null") == json_limits.loads(right or "null")
    except ValueError:
        return False


def _stored_text(item: StoredItem) -> str:
    if isinstance(item, MessageOutput):
        return "".join(part.text for part in item.content)
    if isinstance(item, InputMessageOut):
        return "".join(str(part.get("text", "")) for part in item.content)
    return ""


def _stored_role(item: StoredItem) -> str:
    if isinstance(item, MessageOutput):
        return "assistant"
    role = getattr(item, "role", "")
    return "system" if role == "developer" else str(role)


def is_message(item: StoredItem) -> bool:
    return isinstance(item, MessageOutput | InputMessageOut)


def _call_of(item: StoredItem) -> str | None:
    """The call id behind a stored tool call (`mcp_<call id>`)."""
    return item.id.removeprefix("mcp_") if isinstance(item, McpCall) else None


def mismatch(entry: Entry, item: StoredItem) -> str | None:
    """Why `entry` does not say what the stored `item` says (None: it does)."""
    if entry.kind == "message":
        if not is_message(item):
            return f"it is a message, the stored item '{item.id}' is a {item.type}"
        if entry.role != _stored_role(item):
            return f"its role is '{entry.role}', the stored message's is '{_stored_role(item)}'"
        if entry.text != _stored_text(item):
            return "its text differs from the stored message's"
        return None
    if entry.kind in ("mcp_call", "mcp_approval_request"):
        if entry.kind != item.type:
            return f"it is a {entry.kind}, the stored item '{item.id}' is a {item.type}"
        if not isinstance(item, McpCall | McpApprovalRequest):
            return f"the stored item '{item.id}' is a {item.type}"
        if entry.name != item.name or not _same_json(entry.arguments, item.arguments):
            return "its tool or arguments differ from the stored call's"
        if isinstance(item, McpCall) and entry.output is not None and entry.output != item.output:
            return "its output differs from the stored call's"
        return None
    return f"items of type '{entry.kind}' do not repeat stored items"


def _decision_mismatch(entry: Entry, item: StoredItem) -> str | None:
    if not isinstance(item, ApprovalResponseOut) or entry.approval is None:
        return f"the stored item '{item.id}' is a {item.type}"
    if entry.approval.approve != item.approve:
        decided = "approved" if item.approve else "rejected"
        return f"the approval request '{item.approval_request_id}' was already {decided}"
    return None


def _find(stored: list[StoredItem], start: int, match: Any) -> int | None:
    return next((at for at in range(start, len(stored)) if match(stored[at])), None)


def reconcile(entries: list[Entry], stored: list[StoredItem]) -> Reconciled:
    """The new items of `entries`, given the conversation as stored (see the module docstring); 400 naming the item
    that contradicts it."""
    by_id = {item.id: at for at, item in enumerate(stored)}
    by_call = {_call_of(item): at for at, item in enumerate(stored) if _call_of(item)}
    decisions = {
        item.approval_request_id: at for at, item in enumerate(stored) if isinstance(item, ApprovalResponseOut)
    }
    result = Reconciled()
    position = 0  # stored items before it are matched (or passed over)
    turn_position = 0  # the same, by the items that are not repeated answers (those have no order among themselves)

    def contradiction(entry: Entry, why: str) -> Exception:
        return openai_error(
            400,
            f"Invalid '{entry.param}': it contradicts the stored conversation: {why}.",
            param=entry.param,
            code="input_contradicts_conversation",
        )

    def matched(entry: Entry, at: int, *, after_its_call: bool = False, answer: bool = False) -> None:
        """`entry` repeats `stored[at]`; a function_call_output repeats the call it follows (its `mcp_call`, which
        `at` names, may be behind: the position stays where it is, else it would pass over the next stored item).
        An `answer` (a repeated `mcp_approval_response`) has no order among other answers, new or repeated - a
        response's requests are answered as a set, and two clients answering at once send them in their own order -
        but not before an item of the turn it came after."""
        nonlocal position, turn_position
        if any(not (answer and new.kind == "mcp_approval_response") for new in result.new):
            first = result.new[0]
            raise contradiction(entry, f"it repeats a stored item after the new item {first.param}")
        if at < (turn_position if answer else position) and not after_its_call:
            raise contradiction(entry, f"the stored item '{stored[at].id}' comes earlier in the conversation")
        result.repeated += 1
        position = max(position, at + 1)
        if not answer:
            turn_position = position

    for entry in entries:
        if entry.kind in ("reasoning", "mcp_list_tools"):
            continue  # nothing in them takes effect here
        if entry.kind == "mcp_approval_response" and entry.approval is not None:
            at = decisions.get(entry.approval.approval_request_id)
            if at is None:
                result.new.append(entry)  # a decision on an open request
                continue
            if _decision_mismatch(entry, stored[at]) is not None:
                # Another decision on a decided request: the approval path refuses it (409, who decided).
                result.new.append(entry)
                continue
            matched(entry, at, answer=True)
            result.decisions.append(entry)
            continue
        if entry.kind in ("function_call", "function_call_output"):
            at = by_call.get(entry.call_id)
            if at is None:
                raise openai_error(
                    400,
                    f"Invalid '{entry.param}': call '{entry.call_id}' is not a call of this conversation (tools run "
                    "on the server: client-side function tools are not supported).",
                    param=entry.param,
                    code="unsupported_parameter",
                )
            call = stored[at]
            if not isinstance(call, McpCall):
                raise contradiction(entry, f"the stored item '{call.id}' is a {call.type}")
            if entry.kind == "function_call" and (
                entry.name != call.name or not _same_json(entry.arguments, call.arguments)
            ):
                raise contradiction(entry, "its tool or arguments differ from the stored call's")
            if entry.kind == "function_call_output" and entry.output is not None and entry.output != call.output:
                raise contradiction(entry, "its output differs from the stored call's")
            matched(entry, at, after_its_call=entry.kind == "function_call_output")
            continue
        at = by_id.get(entry.id) if entry.id is not None else None
        if at is not None:
            if (why := mismatch(entry, stored[at])) is not None:
                raise contradiction(entry, why)
            matched(entry, at)
            continue
        if entry.kind in REPEAT_ONLY:
            raise openai_error(
                400,
                f"Invalid '{entry.param}': no {entry.kind} '{entry.id}' in the conversation (a {entry.kind} can only "
                "repeat an item of an earlier response of the same conversation).",
                param=entry.param,
                code="input_item_not_found",
            )
        # A message without one of our ids: the next stored message, or a new one. After a new item nothing stored
        # may follow, so nothing is looked for (a scan per item would cost input x conversation steps).
        nxt = _find(stored, position, is_message) if not result.new else None
        if nxt is not None and mismatch(entry, stored[nxt]) is None:
            matched(entry, nxt)
            continue
        if entry.role == "assistant" and result.repeated:
            raise contradiction(entry, "an assistant message that is not the stored one continues the conversation")
        result.new.append(entry)
    _check_outputs(entries)
    if result.new and turn_position:  # items of the conversation were repeated, not only answers
        # A call an answer of this request approved is that answer's, not the conversation going on without it.
        answered = {e.approval.approval_request_id for e in result.decisions if e.approval is not None}

        def went_on(item: StoredItem) -> bool:
            return is_message(item) or (isinstance(item, McpCall) and item.approval_request_id not in answered)

        moved_on = _find(stored, position, went_on)
        if moved_on is not None:
            first = result.new[0]
            raise contradiction(
                first,
                f"the conversation went on after the items repeated before it (stored item '{stored[moved_on].id}' "
                "is missing); send the whole conversation, or continue it with previous_response_id",
            )
    return result


def _check_outputs(entries: list[Entry]) -> None:
    """Every function_call sent comes with its function_call_output, as OpenAI requires of an input list (its error,
    word for word): a model turn's outputs go back complete, never some of them."""
    answered = {e.call_id for e in entries if e.kind == "function_call_output"}
    missing = next((e for e in entries if e.kind == "function_call" and e.call_id not in answered), None)
    if missing is not None:
        raise openai_error(
            400,
            f"No tool output found for function call {missing.call_id}.",
            param=missing.param,
            code="tool_output_missing",
        )
