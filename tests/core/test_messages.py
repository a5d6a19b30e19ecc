"""Messages have a stable JSON form and the helpers callers rely on (text, pending approvals, streaming assembly)."""

import pytest
from pydantic import BaseModel, ValidationError

from agent_runtime.messages import (
    ChatResponse,
    ChatResponseUpdate,
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    TextContent,
    Usage,
    UsageContent,
    UserInputRequestContent,
    UserInputResponseContent,
    last_assistant_text,
    pending_approval_requests,
    response_text,
    unanswered_function_calls,
)

CALL = FunctionCallContent(call_id="c1", name="send_email", arguments={"to": "a@b.c"})


def test_json_form_is_stable_and_round_trips() -> None:
    message = Message(
        role="assistant",
        contents=[
            TextContent(text="hi"),
            CALL,
            FunctionResultContent(call_id="c1", error="boom"),
            FunctionApprovalRequestContent(id="a1", function_call=CALL),
            FunctionApprovalResponseContent(id="a1", approved=False, function_call=CALL, reason="no"),
            UsageContent(usage=Usage(input_tokens=1, output_tokens=2, total_tokens=3)),
        ],
        message_id="m1",
    )
    data = message.model_dump(mode="json")
    assert [c["type"] for c in data["contents"]] == [
        "text",
        "function_call",
        "function_result",
        "function_approval_request",
        "function_approval_response",
        "usage",
    ]
    assert data["contents"][1] == {
        "type": "function_call",
        "call_id": "c1",
        "name": "send_email",
        "arguments": {"to": "a@b.c"},
    }
    assert Message.model_validate(data) == message
    assert Message.model_validate_json(message.model_dump_json()) == message


def test_unknown_content_types_and_roles_are_rejected() -> None:
    with pytest.raises(ValidationError):
        Message.model_validate({"role": "user", "contents": [{"type": "hologram"}]})
    with pytest.raises(ValidationError):
        Message.model_validate({"role": "robot", "contents": []})


def test_approval_contents_follow_option_5() -> None:
    request = FunctionApprovalRequestContent(id="a1", function_call=CALL)
    assert isinstance(request, UserInputRequestContent)
    approval = request.create_approval(arguments={"to": "x@y.z"}, reason="fixed address")
    assert isinstance(approval, UserInputResponseContent)
    assert (approval.id, approval.approved, approval.function_call.arguments) == ("a1", True, {"to": "x@y.z"})
    assert request.function_call.arguments == {"to": "a@b.c"}  # the request is not changed
    rejection = request.create_rejection("not now")
    assert (rejection.approved, rejection.reason, rejection.function_call) == (False, "not now", CALL)


def test_pending_approval_requests_and_unanswered_calls() -> None:
    first = FunctionApprovalRequestContent(id="a1", function_call=CALL)
    second = FunctionApprovalRequestContent(id="a2", function_call=CALL.model_copy(update={"call_id": "c2"}))
    messages = [
        Message(role="assistant", contents=[CALL, second.function_call]),
        Message(role="assistant", contents=[first, second]),
        Message(role="user", contents=[first.create_approval()]),
        Message.tool_result(FunctionResultContent(call_id="c1", result="sent")),
    ]
    assert pending_approval_requests(messages) == [second]
    assert [c.call_id for c in unanswered_function_calls(messages)] == ["c2"]


def test_text_helpers() -> None:
    assert Message(role="user", contents="hi").text == "hi"
    assert Message(role="user", contents=["a", CALL, "b"]).text == "ab"
    messages = [
        Message.user("q"),
        Message.assistant("one"),
        Message(role="assistant", contents=[CALL]),
        Message.assistant("two"),
    ]
    assert response_text(messages) == "one\n\ntwo"
    assert last_assistant_text(messages) == "two"
    response = ChatResponse(message=Message.assistant("x"), finish_reason="stop")
    assert (response.text, response.messages[0].role) == ("x", "assistant")


def test_arguments_parse_from_json_text_with_model_readable_errors() -> None:
    assert FunctionCallContent(call_id="c", name="f", arguments='{"a": 1}').parse_arguments() == {"a": 1}
    assert FunctionCallContent(call_id="c", name="f", arguments="").parse_arguments() == {}
    with pytest.raises(ValueError, match="not valid JSON"):
        FunctionCallContent(call_id="c", name="f", arguments='{"a": ').parse_arguments()
    with pytest.raises(ValueError, match="must be a JSON object, got list"):
        FunctionCallContent(call_id="c", name="f", arguments="[1]").parse_arguments()
    assert CALL.arguments_json() == '{"to":"a@b.c"}'


def test_streamed_updates_assemble_into_one_response() -> None:
    updates = [
        ChatResponseUpdate(role="assistant", contents="The ", message_id="m", response_id="r", model_id="gpt"),
        ChatResponseUpdate(contents="answer", message_id="m"),
        ChatResponseUpdate(contents=[FunctionCallContent(call_id="c1", name="f", arguments='{"q"')], message_id="m"),
        ChatResponseUpdate(contents=[FunctionCallContent(call_id="c1", name="", arguments=": 1}")], message_id="m"),
        ChatResponseUpdate(finish_reason="tool_calls"),
        ChatResponseUpdate(contents=[UsageContent(usage=Usage(input_tokens=5, output_tokens=3, total_tokens=8))]),
    ]
    response = ChatResponse.from_updates(updates)
    assert (response.response_id, response.model_id, response.finish_reason) == ("r", "gpt", "tool_calls")
    assert response.usage == Usage(input_tokens=5, output_tokens=3, total_tokens=8)
    [message] = response.messages
    assert message.text == "The answer"
    assert message.function_calls == [FunctionCallContent(call_id="c1", name="f", arguments='{"q": 1}')]


class Person(BaseModel):
    name: str


def test_structured_output_value() -> None:
    response = ChatResponse(message=Message.assistant('{"name": "Ada"}'))
    assert response.parse_value(Person) == Person(name="Ada")
    with pytest.raises(ValidationError):
        ChatResponse(message=Message.assistant("{}")).parse_value(Person)


def test_usage_adds_up() -> None:
    assert Usage(input_tokens=1, output_tokens=2, total_tokens=3) + Usage(
        input_tokens=1, total_tokens=1
    ) + None == Usage(input_tokens=2, output_tokens=2, total_tokens=4)
