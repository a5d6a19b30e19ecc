"""Stateless input lists (`http_api.openai_responses.conversation.reconcile`): the items of earlier responses sent
back are recognised (by id, else by content and position) and only the new ones take effect; a list that
contradicts the stored conversation is refused naming the item."""

from __future__ import annotations

from typing import Any

import pytest

from http_api.openai_responses import conversation
from http_api.openai_responses.conversation import reconcile
from http_api.openai_responses.models import (
    ApprovalResponseOut,
    InputMessageOut,
    McpApprovalRequest,
    McpCall,
    MessageOutput,
    OutputText,
)
from http_api.openai_responses.requests import parse_create
from http_api.problems import ApiProblem

RUN = "a" * 32
STORED = [
    InputMessageOut(id=f"msg_{RUN}:input:0", role="user", content=[{"type": "input_text", "text": "What is a?"}]),
    McpCall(id="mcp_call1", server_label="helper", name="lookup", arguments='{"key": "a"}', output='{"v": 1}'),
    MessageOutput(id=f"msg_{RUN}:model:2:0", content=[OutputText(text="It is 1.")]),
    McpApprovalRequest(id="appr1", server_label="helper", name="send_email", arguments='{"to": "bob"}'),
]
USER = {"role": "user", "content": "What is a?"}
CALL = {
    "type": "mcp_call", "id": "mcp_call1", "server_label": "helper", "name": "lookup", "arguments": '{"key":"a"}',
    "output": '{"v": 1}', "status": "completed", "error": None, "approval_request_id": None,
}
ANSWER = {
    "type": "message", "id": f"msg_{RUN}:model:2:0", "role": "assistant", "status": "completed",
    "content": [{"type": "output_text", "text": "It is 1.", "annotations": [], "logprobs": []}],
}
REQUEST = {"type": "mcp_approval_request", "id": "appr1", "server_label": "helper", "name": "send_email",
           "arguments": '{"to": "bob"}'}


def entries(*items: dict[str, Any]) -> list[Any]:
    return parse_create({"model": "helper", "input": list(items)}).entries


def new_of(*items: dict[str, Any], stored: list[Any] = STORED) -> list[tuple[int, str]]:
    result = reconcile(entries(*items), stored)
    return [(e.index, e.kind) for e in result.new]


def refusal(*items: dict[str, Any], stored: list[Any] = STORED) -> tuple[str | None, str]:
    with pytest.raises(ApiProblem) as error:
        reconcile(entries(*items), stored)
    assert error.value.status == 400
    return error.value.field, error.value.detail


def test_the_sdk_list_after_a_tool_turn_adds_only_the_new_message() -> None:
    follow_up = {"role": "user", "content": "And b?"}
    assert new_of(USER, CALL, ANSWER, follow_up, stored=STORED[:3]) == [(3, "message")]
    # The same text as an earlier message, after the whole conversation: new (position decides, not text alone).
    assert new_of(USER, CALL, ANSWER, USER, stored=STORED[:3]) == [(3, "message")]


def test_an_approval_answer_after_the_repeated_request_is_the_only_new_item() -> None:
    answer = {"type": "mcp_approval_response", "approval_request_id": "appr1", "approve": True}
    assert new_of(USER, CALL, ANSWER, REQUEST, answer) == [(4, "mcp_approval_response")]
    # Reasoning and tool listings carry nothing that takes effect: skipped.
    listing = {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "helper", "tools": []}
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    assert new_of(USER, listing, reasoning, CALL, ANSWER, REQUEST, answer) == [(6, "mcp_approval_response")]


def test_a_decision_sent_again_is_recognised_and_a_different_one_goes_to_the_decision_path() -> None:
    decided = [*STORED, ApprovalResponseOut(id="mcpr_appr1", approval_request_id="appr1", approve=True)]
    same = {"type": "mcp_approval_response", "approval_request_id": "appr1", "approve": True}
    follow_up = {"role": "user", "content": "thanks"}
    assert new_of(USER, CALL, ANSWER, REQUEST, same, follow_up, stored=decided) == [(5, "message")]
    # Sent again alone (a client retrying its answer): the decision is what the request does, as before.
    assert [e.index for e in reconcile(entries(USER, CALL, ANSWER, REQUEST, same), decided).effective] == [4]
    # A different decision is new: the approval path refuses it (409 approval_already_decided, naming input[4]).
    assert new_of(USER, CALL, ANSWER, REQUEST, {**same, "approve": False}, stored=decided) == [
        (4, "mcp_approval_response")
    ]


def test_answers_to_a_responses_requests_have_no_order_among_themselves() -> None:
    """Two clients answer one response's two requests at once (found by a storm probe): the second sends both
    answers, one of them already stored by the first, in its own order. The answers are a set (each names its
    request): a repeated one takes nothing and the other decides, whatever their order (it was a 400 when the
    repeated answer came after the new one, or before an answer stored earlier)."""
    second = McpApprovalRequest(id="appr2", server_label="helper", name="send_email", arguments='{"to": "al"}')
    asked = [*STORED, second]
    one = {"type": "mcp_approval_response", "approval_request_id": "appr1", "approve": True}
    two = {"type": "mcp_approval_response", "approval_request_id": "appr2", "approve": False}
    first_answered = [*asked, ApprovalResponseOut(id="mcpr_appr1", approval_request_id="appr1", approve=True)]
    assert new_of(two, one, stored=first_answered) == [(0, "mcp_approval_response")]
    assert new_of(one, two, stored=first_answered) == [(1, "mcp_approval_response")]
    both = [*first_answered, ApprovalResponseOut(id="mcpr_appr2", approval_request_id="appr2", approve=False)]
    for answers in ((one, two), (two, one)):  # both stored: the same answers again, in either order (a retry)
        result = reconcile(entries(*answers), both)
        assert result.new == [] and sorted(e.index for e in result.effective) == [0, 1]
    # The whole list again (the Agents SDK's way) after the first answer started its call: the call is that
    # answer's, not the conversation going on without the list.
    calling = McpCall(id="mcp_call_bob", server_label="helper", name="send_email", arguments='{"to": "bob"}',
                      approval_request_id="appr1")
    started = [*first_answered, calling]
    repeated_turn = (USER, CALL, ANSWER, REQUEST, {**REQUEST, "id": "appr2", "arguments": '{"to": "al"}'})
    assert new_of(*repeated_turn, two, one, stored=started) == [(5, "mcp_approval_response")]
    # Still refused: a stored message after a new answer, and a repeated answer after the turn that followed it.
    assert refusal(two, ANSWER, stored=first_answered)[0] == "input[1]"
    went_on = [STORED[0], STORED[3], ApprovalResponseOut(id="mcpr_appr1", approval_request_id="appr1", approve=True),
               STORED[1], STORED[2]]  # the request answered, then the call ran and the model answered
    field, detail = refusal(USER, CALL, ANSWER, one, stored=went_on)
    assert field == "input[3]" and "earlier" in detail, detail


@pytest.mark.parametrize(
    ("items", "field", "says"),
    [
        ((USER, CALL, {**ANSWER, "content": [{"type": "output_text", "text": "It is 2."}]}), "input[2]", "text"),
        ((USER, {**CALL, "arguments": '{"key": "b"}'}, ANSWER), "input[1]", "arguments"),
        # Arguments nested past what Python's parser can recurse into (a RecursionError was a 500): they differ.
        ((USER, {**CALL, "arguments": "[" * 100_000 + "]" * 100_000}, ANSWER), "input[1]", "arguments"),
        ((USER, {**CALL, "output": "forged"}, ANSWER), "input[1]", "output"),
        ((USER, ANSWER, CALL), "input[2]", "earlier"),
        ((USER, {"role": "user", "content": "new"}, CALL), "input[2]", "after the new item input[1]"),
        ((USER, {**CALL, "id": "mcp_other"}), "input[1]", "no mcp_call"),
        # Repeating only the start of a conversation that went on, then adding to it: a branch.
        ((USER, CALL, {"role": "user", "content": "instead"}), "input[2]", "went on"),
    ],
)
def test_a_list_that_contradicts_the_conversation_is_refused_naming_the_item(
    items: tuple[dict[str, Any], ...], field: str, says: str
) -> None:
    got_field, detail = refusal(*items)
    assert got_field == field and says in detail, detail


def test_client_side_function_items_are_refused_unless_they_repeat_a_stored_call() -> None:
    field, detail = refusal({"type": "function_call_output", "call_id": "c9", "output": "x"})
    assert field == "input[0]" and "client-side function tools" in detail
    repeated = {"type": "function_call", "call_id": "call1", "name": "lookup", "arguments": '{"key": "a"}'}
    output = {"type": "function_call_output", "call_id": "call1", "output": '{"v": 1}'}
    more = {"role": "user", "content": "more"}
    assert new_of(USER, repeated, output, ANSWER, more, stored=STORED[:3]) == [(4, "message")]
    # Without its output: OpenAI's 400 for a call without its output (word for word), naming the call.
    field, detail = refusal(USER, repeated, ANSWER, more, stored=STORED[:3])
    assert (field, detail) == ("input[1]", "No tool output found for function call call1.")


def test_a_batch_of_calls_goes_back_with_its_outputs_after_the_calls_or_after_each() -> None:
    stored = [
        STORED[0],
        McpCall(id="mcp_c1", server_label="helper", name="lookup", arguments='{"key": "a"}', output="1"),
        McpCall(id="mcp_c2", server_label="helper", name="lookup", arguments='{"key": "b"}', output="2"),
        STORED[2],
    ]
    calls = [{"type": "function_call", "call_id": c, "name": "lookup", "arguments": a}
             for c, a in (("c1", '{"key": "a"}'), ("c2", '{"key": "b"}'))]
    outs = [{"type": "function_call_output", "call_id": c, "output": o} for c, o in (("c1", "1"), ("c2", "2"))]
    more = {"role": "user", "content": "more"}
    assert new_of(USER, *calls, *outs, ANSWER, more, stored=stored) == [(6, "message")]
    assert new_of(USER, calls[0], outs[0], calls[1], outs[1], ANSWER, more, stored=stored) == [(6, "message")]
    field, detail = refusal(USER, *calls, outs[1], ANSWER, more, stored=stored)
    assert (field, detail) == ("input[1]", "No tool output found for function call c1.")


def test_without_a_stored_conversation_messages_are_new_and_server_items_unknown() -> None:
    assert new_of(USER, {"role": "assistant", "content": "Hi"}, stored=[]) == [(0, "message"), (1, "message")]
    field, _ = refusal(USER, CALL, stored=[])
    assert field == "input[1]"


def test_the_work_grows_with_the_input_and_the_conversation_not_their_product(monkeypatch: pytest.MonkeyPatch) -> None:
    """One repeated item, then thousands of new messages, against a long conversation (many tool calls after its
    first message): every new message looked for the next stored message again, from the same place - input x
    conversation steps on the worker's event loop (8 s for a 256 KB body against 3,000 calls). Once a new item came,
    no stored one may follow: nothing is looked for. The list is still refused (the conversation went on)."""
    calls = [McpCall(id=f"mcp_c{i}", server_label="helper", name="lookup", arguments="{}") for i in range(1000)]
    stored = [STORED[0], *calls, STORED[2]]
    looked_at = 0
    real_is_message = conversation.is_message

    def counted(item: Any) -> bool:
        nonlocal looked_at
        looked_at += 1
        return real_is_message(item)

    monkeypatch.setattr(conversation, "is_message", counted)
    repeated = {**USER, "type": "message", "id": STORED[0].id}
    hostile = [repeated, *({"role": "user", "content": f"new {i}"} for i in range(2000))]
    field, detail = refusal(*hostile, stored=stored)
    assert field == "input[1]" and "went on" in detail
    assert looked_at <= 2 * (len(hostile) + len(stored)), looked_at
