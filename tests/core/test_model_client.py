"""`OpenAIChatClient` through the real openai SDK against the scripted server: conversion both ways, tools, parallel
tool calls, streaming assembled into a `ChatResponse`."""

from __future__ import annotations

import pytest

from agent_runtime.messages import (
    ChatResponseUpdate,
    FunctionApprovalRequestContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    TextContent,
    Usage,
)
from agent_runtime.models import ChatOptions, ChatRequest, ModelClient, NamedToolChoice, ToolSpec, assemble_response
from scripted_model import Reply, Script, ScriptedToolCall

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def request(*messages: Message, **options) -> ChatRequest:
    return ChatRequest(messages=list(messages) or [Message.user("hi")], tools=[WEATHER], options=ChatOptions(**options))


async def test_client_satisfies_the_protocol(model_client):
    assert isinstance(model_client, ModelClient)


async def test_text_answer_becomes_a_chat_response(scripted_model, model_client):
    scripted_model.set_script(Script.of(Reply(text="Hello!", usage={"prompt_tokens": 7, "completion_tokens": 2})))
    response = await model_client.get_response(request())
    assert response.text == "Hello!"
    assert [m.role for m in response.messages] == ["assistant"]
    assert response.finish_reason == "stop" and response.model_id == "scripted-model"
    assert response.response_id and response.response_id.startswith("chatcmpl-")
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (7, 2, 9)


async def test_conversation_is_sent_in_openai_wire_format(scripted_model, model_client):
    scripted_model.set_script(Script.of("ok"))
    call = FunctionCallContent(call_id="c1", name="get_weather", arguments={"city": "Paris"})
    failed = FunctionCallContent(call_id="c2", name="get_weather", arguments='{"city": ')
    conversation = [
        Message.system("Be brief."),
        Message.user("Weather in Paris?", author_name="alice"),
        Message(role="assistant", contents=[TextContent(text="Checking."), call, failed]),
        Message(role="assistant", contents=[FunctionApprovalRequestContent(id="a1", function_call=call)]),
        Message(
            role="tool",
            contents=[
                FunctionResultContent(call_id="c1", result={"celsius": 18}),
                FunctionResultContent(call_id="c2", error="arguments are not valid JSON"),
            ],
        ),
        Message.user("Thanks", author_name="not a valid name!"),
    ]
    await model_client.get_response(request(*conversation))
    assert scripted_model.log.last.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?", "name": "alice"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
                {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": '}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"celsius": 18}'},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: arguments are not valid JSON"},
        {"role": "user", "content": "Thanks"},
    ]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (NamedToolChoice(name="get_weather"), {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
async def test_tools_and_options_are_sent(scripted_model, model_client, choice, wire):
    scripted_model.set_script(Script.of("ok"))
    await model_client.get_response(
        request(tool_choice=choice, parallel_tool_calls=False, temperature=0.3, max_tokens=50, seed=7)
    )
    body = scripted_model.log.last.body
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": WEATHER.description, "parameters": WEATHER.parameters},
        }
    ]
    assert body["tool_choice"] == wire and body["parallel_tool_calls"] is False
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.3, 50, 7)


async def test_tool_choice_is_not_sent_without_tools(scripted_model, model_client):
    scripted_model.set_script(Script.of("ok"))
    no_tools = ChatRequest(messages=[Message.user("hi")], options=ChatOptions(tool_choice="required"))
    await model_client.get_response(no_tools)
    assert "tools" not in scripted_model.log.last.body and "tool_choice" not in scripted_model.log.last.body


async def test_per_call_model_overrides_the_default(scripted_model, model_client):
    scripted_model.set_script(Script.of("ok"))
    response = await model_client.get_response(request(model="other-model"))
    assert scripted_model.log.last.body["model"] == "other-model" and response.model_id == "other-model"


async def test_parallel_tool_calls_become_function_call_contents(scripted_model, model_client):
    calls = [
        ScriptedToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"}),
        ScriptedToolCall(id="call_b", name="get_weather", arguments={"city": "Rome"}),
        ScriptedToolCall(id="call_c", name="get_weather", arguments='{"city": "Li'),
    ]
    scripted_model.set_script(Script(turns=[Reply(tool_calls=calls)]))
    response = await model_client.get_response(request())
    assert response.finish_reason == "tool_calls"
    assert response.function_calls == [
        FunctionCallContent(call_id="call_a", name="get_weather", arguments={"city": "Paris"}),
        FunctionCallContent(call_id="call_b", name="get_weather", arguments={"city": "Rome"}),
        FunctionCallContent(call_id="call_c", name="get_weather", arguments='{"city": "Li'),  # kept for the model
    ]


@pytest.mark.parametrize(
    "reply",
    [
        Reply(text="A longer answer that spans several stream chunks, to be joined back together."),
        Reply(
            text="Let me check both.",
            tool_calls=[
                ScriptedToolCall(id="call_a", name="get_weather", arguments={"city": "Paris", "unit": "celsius"}),
                ScriptedToolCall(id="call_b", name="get_weather", arguments={"city": "Rio de Janeiro"}),
            ],
        ),
    ],
)
async def test_streaming_assembles_to_the_same_response_as_a_plain_call(scripted_model, model_client, reply):
    scripted_model.set_script(Script.of(reply, reply))
    plain = await model_client.get_response(request())
    updates = [u async for u in model_client.get_streaming_response(request())]
    streamed = assemble_response(updates)
    assert len(updates) > 2
    assert scripted_model.log.last.body["stream_options"] == {"include_usage": True}
    assert streamed.messages[0].contents == plain.messages[0].contents
    assert streamed.finish_reason == plain.finish_reason
    assert streamed.usage == plain.usage and streamed.usage.total_tokens > 0
    assert streamed.response_id and streamed.response_id != plain.response_id


def _chunk(**choice_fields) -> dict:
    choice = {"index": 0, "delta": {"role": "assistant", "content": "Hi"}, "finish_reason": None, **choice_fields}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "m",
            "choices": [choice]}


def _update(**fields) -> ChatResponseUpdate:
    return ChatResponseUpdate(response_id="chatcmpl-1", model_id="m", **fields)


_HI = _update(role="assistant", contents=[TextContent(text="Hi")])


@pytest.mark.parametrize(("data", "expected"), [
    (_chunk(), _HI),
    (_chunk(delta={"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                   "function": {"name": "get_weather", "arguments": "{\"ci"}}]}),
     _update(contents=[FunctionCallContent(call_id="c1", name="get_weather", arguments="{\"ci")])),
    ({**_chunk(), "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}},
     _update(usage=Usage(input_tokens=3, output_tokens=2, total_tokens=5))),
    # not one of the SDK's literals: an OpenAI-compatible server's own reason
    (_chunk(finish_reason="eos"), _HI.model_copy(update={"finish_reason": "eos"})),
    ({key: value for key, value in _chunk().items() if key != "created"}, _HI),  # the SDK requires `created`
    (_chunk(delta={"role": "assistant", "content": ""}, finish_reason="stop"),
     _update(role="assistant", finish_reason="stop")),
])
def test_stream_events_read_leniently_into_updates(data, expected):
    """Stream events are read from their JSON, leniently: odd but usable chunks read as their fields say."""
    from agent_runtime.models.openai_wire import StreamTranslator

    assert StreamTranslator().translate(data) == expected


def test_a_tool_calls_later_fragments_keep_its_first_fragments_id_and_name():
    from agent_runtime.models.openai_wire import StreamTranslator

    translator = StreamTranslator()
    first = {"index": 0, "id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{"}}
    translator.translate(_chunk(delta={"tool_calls": [first]}))
    later = translator.translate(_chunk(delta={"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}))
    assert later.contents == [FunctionCallContent(call_id="c1", name="get_weather", arguments="}")]


@pytest.mark.parametrize("data", [["not", "a", "chunk"], {"choices": ["not a choice"]},
                                  _chunk(delta={"tool_calls": [{"id": "no index"}]})])
def test_a_stream_event_no_chunk_can_be_is_a_value_error_not_a_crash(data):
    """(`OpenAIChatClient` turns a `ValueError` from the stream into a `ModelError`.)"""
    from agent_runtime.models.openai_wire import StreamTranslator

    with pytest.raises(ValueError):
        StreamTranslator().translate(data)
