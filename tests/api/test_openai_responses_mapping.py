"""The pure parts of the Responses surface: response ids, what a create request may carry, and how a run's stored
messages become turns and output items (the e2e suite drives the same through the official client)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agent_runtime.messages import (
    FunctionApprovalRequestContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    TextContent,
    Usage,
)
from http_api.openai_responses.ids import ResponseRef, parse_response_id
from http_api.openai_responses.mapping import RunSnapshot, batch_of, build_response, input_items, turn_count
from http_api.openai_responses.requests import parse_create
from http_api.problems import ApiProblem
from session_store import ApprovalRecord, MessageRecord, RunRecord

RUN = "0123456789abcdef0123456789abcdef"
FIRST = 1_000_000_000
EMAIL = {"to": "bob@example.com"}


# ----------------------------------------------------------------------------------------------- ids


def test_response_ids_round_trip() -> None:
    for ref in (ResponseRef(RUN), ResponseRef(RUN, 2), ResponseRef(RUN, 17)):
        assert parse_response_id(ref.response_id) == ref
    assert ResponseRef(RUN).response_id == f"resp_{RUN}" and ResponseRef(RUN).next().response_id == f"resp_{RUN}_2"


@pytest.mark.parametrize(
    "value", [RUN, f"resp_{RUN}_1", f"resp_{RUN}_0", f"resp_{RUN.upper()}", "resp_abc", f"resp_{RUN}_x", f"resp_{RUN}_"]
)
def test_one_spelling_per_response(value: str) -> None:
    assert parse_response_id(value) is None


# ----------------------------------------------------------------------------------------------- requests


def param_of(body: dict[str, Any]) -> tuple[int, str | None, str]:
    with pytest.raises(ApiProblem) as error:
        parse_create({"model": "helper", "input": "hi", **body})
    return error.value.status, error.value.field, error.value.code


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"temperature": 0.1}, "temperature"),
        ({"tool_choice": "none"}, "tool_choice"),
        # `tools` is checked against the agent (hosted_tools; tests/e2e/test_e2e_openai_responses.py).
        ({"max_output_tokens": 5}, "max_output_tokens"),
        ({"store": False}, "store"),
        ({"reasoning": {"effort": "low"}}, "reasoning"),
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
            "input[0].content[0].type",
        ),
    ],
)
def test_unsupported_parameters_are_named(body: dict[str, Any], param: str) -> None:
    assert param_of(body) == (400, param, "unsupported_parameter")


def test_stream_options_need_a_stream() -> None:
    assert parse_create({"model": "helper", "input": "hi", "stream": True, "stream_options": {}}).body.stream
    streamed = parse_create(
        {"model": "helper", "input": "hi", "stream": True, "stream_options": {"include_obfuscation": False}}
    )
    assert streamed.body.stream_options is not None
    with pytest.raises(ApiProblem) as error:
        parse_create({"model": "helper", "input": "hi", "stream_options": {"include_obfuscation": True}})
    assert (error.value.status, error.value.field) == (400, "stream_options")


def test_values_that_change_nothing_are_accepted() -> None:
    request = parse_create(
        {"model": "helper", "input": "hi", "tools": [], "truncation": "disabled", "store": True, "temperature": None}
    )
    assert [m.text for m in request.messages] == ["hi"]


def test_input_messages_and_answers() -> None:
    request = parse_create(
        {
            "model": "helper",
            "input": [
                {"role": "developer", "content": "be brief"},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}]},
            ],
        }
    )
    assert [(m.role, m.text) for m in request.messages] == [("system", "be brief"), ("user", "a")]
    answers = [{"type": "mcp_approval_response", "approval_request_id": "x", "approve": True}]
    # Answers may repeat a stored conversation: checked once it is read (`stateless.resolve_input` -> `take`; an
    # answer with no conversation to answer needs previous_response_id: tests/e2e/test_e2e_openai_responses.py).
    mixed = parse_create({"model": "helper", "input": [*answers, {"role": "user", "content": "and"}]})
    with pytest.raises(ApiProblem) as refused:
        mixed.take(mixed.entries)
    assert refused.value.field == "input"
    assert (
        param_of({"input": [{"type": "mcp_approval_response", "approve": True}]})[1] == "input[0].approval_request_id"
    )
    assert param_of({"input": []})[1] == "body.input"
    assert param_of({"text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": 3}}}})[1] == (
        "text.format.schema"
    )


# ----------------------------------------------------------------------------------------------- turns


def record(position: int, message: Message) -> MessageRecord:
    return MessageRecord(
        session_id="s",
        message_id=message.message_id or f"{RUN}:m:{position}",
        seq=FIRST + position,
        run_id=RUN,
        role=message.role,
        payload=message.model_dump(mode="json"),
    )


FIRST_CALL = Usage(input_tokens=3, output_tokens=2, total_tokens=5)
FAILED_CALL = Usage(input_tokens=1, output_tokens=0, total_tokens=1)


def approval_run(decided: bool, answered: bool) -> RunSnapshot:
    call = FunctionCallContent(call_id="c1", name="send_email", arguments=EMAIL)
    request = FunctionApprovalRequestContent(id=f"{RUN}:c1", function_call=call)
    messages = [
        record(0, Message(role="user", contents=[TextContent(text="email bob")], message_id=f"{RUN}:input:0")),
        record(1, Message(role="assistant", contents=[TextContent(text="Asking first."), call], usage=FIRST_CALL)),
        record(17, Message(role="assistant", contents=[request])),
    ]
    if answered:
        messages += [
            record(18, Message(role="user", contents=[request.create_approval()])),
            record(19, Message(role="tool", contents=[FunctionResultContent(call_id="c1", result={"sent": True})])),
            record(20, Message(role="assistant", contents=[TextContent(text="Sent.")], usage=FIRST_CALL)),
        ]
    approval = ApprovalRecord(
        approval_id=f"{RUN}:c1",
        run_id=RUN,
        session_id="s",
        call_id="c1",
        tool="send_email",
        arguments=EMAIL,
        status="approved" if decided else "pending",
        decided_at=datetime(2026, 1, 1, tzinfo=UTC) if decided else None,
    )
    status = "completed" if answered else "requires_action"
    run = RunRecord(
        run_id=RUN,
        session_id="s",
        agent="helper",
        ordinal=1,
        status=status if answered else "in_progress",
        created_at=datetime(2025, 1, 1, tzinfo=UTC),
        output={"text": "Sent."} if answered else None,
    )
    return RunSnapshot(
        run=run,
        status=status,
        messages=messages,
        approvals=[approval],
        # Answered: the two calls and a failed one that was billed (no stored answer shows it).
        usage=FIRST_CALL + FIRST_CALL + FAILED_CALL if answered else FIRST_CALL,
        waiting_on=[] if answered else [approval.approval_id],
    )


def test_a_run_paused_for_approval_is_a_completed_turn() -> None:
    snapshot = approval_run(decided=False, answered=False)
    first = build_response(snapshot, ResponseRef(RUN))
    assert first is not None and first.status == "completed"
    assert [item.type for item in first.output] == ["message", "mcp_approval_request"]
    assert first.output_text == "Asking first." and first.usage is not None and first.usage.total_tokens == 5
    assert build_response(snapshot, ResponseRef(RUN, 2)) is None  # before a decision: nobody created it yet
    assert batch_of(snapshot, f"{RUN}:c1") == 1 and batch_of(snapshot, "other") is None
    assert [i.type for i in input_items(snapshot, ResponseRef(RUN))] == ["message"]


def test_a_decision_on_its_way_keeps_the_next_turn_in_progress() -> None:
    snapshot = approval_run(decided=True, answered=False)
    second = build_response(snapshot, ResponseRef(RUN, 2))
    assert second is not None and (second.status, second.output) == ("in_progress", [])


def test_the_rest_of_the_run_is_the_next_turn() -> None:
    snapshot = approval_run(decided=True, answered=True)
    assert turn_count(snapshot) == 2
    first, second = build_response(snapshot, ResponseRef(RUN)), build_response(snapshot, ResponseRef(RUN, 2))
    assert first is not None and second is not None
    assert [i.type for i in first.output] == ["message", "mcp_approval_request"]
    [call, message] = second.output
    assert call.type == "mcp_call" and call.output == '{"sent": true}' and call.approval_request_id == f"{RUN}:c1"
    assert message.type == "message"
    assert (second.status, second.output_text, second.previous_response_id) == ("completed", "Sent.", first.id)
    # Each turn's usage is its own (a client adds them up, as OpenAI's are): the latest has the rest of the run's.
    assert first.usage is not None and second.usage is not None
    assert (first.usage.total_tokens, second.usage.input_tokens, second.usage.total_tokens) == (5, 4, 6)
    assert second.created_at == datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    [item] = input_items(snapshot, ResponseRef(RUN, 2))
    assert (item.type, item.approve) == ("mcp_approval_response", True)  # type: ignore[union-attr]


def test_a_redelivered_call_counts_once_in_its_turn() -> None:
    """A model call redelivered after its first attempt stored a longer answer (two messages, the first attempt's
    usage on the second): the second attempt rewrites the first message with both attempts' usage
    (`steps._split_own_answer`) and leaves the first attempt's second message where it was. The turn counts the
    call once, with what both attempts were billed, and the run's turns still add up to its total."""
    answered = approval_run(decided=True, answered=True)
    first_attempt = Usage(input_tokens=3, output_tokens=4, total_tokens=7)
    call = answered.messages[1].payload["contents"]
    both = first_attempt + FIRST_CALL
    messages = [
        answered.messages[0],
        record(1, Message.model_validate({"role": "assistant", "contents": call, "usage": both.model_dump(),
                                          "message_id": f"{RUN}:model:0:0"})),
        record(2, Message(role="assistant", contents=[TextContent(text="(left over)")], usage=first_attempt,
                          message_id=f"{RUN}:model:0:1")),
        *answered.messages[2:],
    ]
    snapshot = RunSnapshot(run=answered.run, status=answered.status, messages=messages, approvals=answered.approvals,
                           usage=both + FIRST_CALL, waiting_on=[])
    first, second = build_response(snapshot, ResponseRef(RUN)), build_response(snapshot, ResponseRef(RUN, 2))
    assert first is not None and first.usage is not None and second is not None and second.usage is not None
    assert (first.usage.total_tokens, second.usage.total_tokens) == (both.total_tokens, FIRST_CALL.total_tokens)
    assert build_response(snapshot, ResponseRef(RUN, 3)) is None
