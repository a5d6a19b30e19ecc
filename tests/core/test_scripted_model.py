"""The scripted OpenAI-compatible server, driven through the real openai SDK (and raw HTTP where the wire itself is
the point: SSE framing, headers, error bodies)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import openai
import pytest
from pydantic import BaseModel

from scripted_model import Fault, Match, Reply, Rule, Script, ScriptedModelServer, ScriptedToolCall

FIXTURES = Path(__file__).parent / "fixtures"
USER = [{"role": "user", "content": "hello"}]


@pytest.fixture
async def sdk(scripted_model: ScriptedModelServer):
    client = openai.AsyncOpenAI(base_url=scripted_model.base_url, api_key="test-key", max_retries=0, timeout=10)
    yield client
    await client.close()


async def test_turns_are_served_in_order_then_the_script_is_exhausted(scripted_model, sdk):
    scripted_model.set_script(Script.of("first", "second"))
    first = await sdk.chat.completions.create(model="m", messages=USER)
    second = await sdk.chat.completions.create(model="m", messages=USER)
    assert [first.choices[0].message.content, second.choices[0].message.content] == ["first", "second"]
    assert first.choices[0].finish_reason == "stop"
    assert first.usage is not None and first.usage.total_tokens > 0
    with pytest.raises(openai.InternalServerError) as info:
        await sdk.chat.completions.create(model="m", messages=USER)
    assert "no reply left" in info.value.message
    assert [r.outcome for r in scripted_model.log.requests] == ["reply", "reply", "script_exhausted"]


async def test_parallel_tool_calls_are_sent_with_distinct_ids(scripted_model, sdk):
    calls = [ScriptedToolCall(name="get_weather", arguments={"city": c}) for c in ("Paris", "Rome")]
    scripted_model.set_script(Script(turns=[Reply(tool_calls=calls)]))
    completion = await sdk.chat.completions.create(model="m", messages=USER)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    tool_calls = choice.message.tool_calls or []
    assert [json.loads(c.function.arguments) for c in tool_calls] == [{"city": "Paris"}, {"city": "Rome"}]
    assert len({c.id for c in tool_calls}) == 2
    assert all(c.id.startswith("call_") for c in tool_calls)


async def test_rules_match_the_conversation_and_respect_times(scripted_model, sdk):
    scripted_model.set_script(
        Script(
            rules=[
                Rule(match=Match(last_tool_name="get_weather", last_tool_result="sunny"), reply=Reply.say("Go out!")),
                Rule(match=Match(last_user=r"weather", after_tool_results=False), reply=Reply.call("get_weather")),
                Rule(match=Match(last_user="^once$"), reply=Reply.say("only once"), times=1),
            ],
            default=Reply.say("default"),
        )
    )

    async def ask(messages):
        return (await sdk.chat.completions.create(model="m", messages=messages)).choices[0].message

    call = (await ask([{"role": "user", "content": "What's the WEATHER?"}])).tool_calls[0]
    follow_up = [
        {"role": "user", "content": "What's the weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C"},
    ]
    assert (await ask(follow_up)).content == "Go out!"
    assert (await ask([{"role": "user", "content": "once"}])).content == "only once"
    assert (await ask([{"role": "user", "content": "once"}])).content == "default"


async def test_streaming_matches_agent_framework_contract(scripted_model):
    """The exact request Microsoft Agent Framework's OpenAIChatCompletionClient sends (docs/durable-protocol.md,
    "Model endpoint contract"): stream with include_usage; SSE chunks, a usage-only chunk, then [DONE]."""
    scripted_model.set_script(Script.of("Echo #1: tell me a joke, told at some length to span chunks"))
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "system", "content": "You are Joker."}, {"role": "user", "content": "tell me a joke"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{scripted_model.base_url}/chat/completions", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [line[len("data: ") :] for line in response.text.split("\n\n") if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Echo #1: tell me a joke, told at some length to span chunks"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    assert scripted_model.log.last.body == body


async def test_streaming_without_include_usage_sends_no_usage_chunk(scripted_model, sdk):
    scripted_model.set_script(Script.of(Reply.call("f", {"a": 1})))
    stream = await sdk.chat.completions.create(model="m", messages=USER, stream=True)
    chunks = [c async for c in stream]
    assert all(c.choices for c in chunks) and all(c.usage is None for c in chunks)
    fragments = [tc for c in chunks for tc in c.choices[0].delta.tool_calls or []]
    assert fragments[0].function.name == "f"
    assert json.loads("".join(f.function.arguments or "" for f in fragments)) == {"a": 1}


async def test_unscripted_structured_output_is_a_valid_sample(scripted_model, sdk):
    class Weather(BaseModel):
        city: str
        celsius: float
        tags: list[str]

    scripted_model.set_script(Script(default=Reply()))
    completion = await sdk.chat.completions.parse(model="m", messages=USER, response_format=Weather)
    assert isinstance(completion.choices[0].message.parsed, Weather)


async def test_http_faults_carry_retry_after_and_openai_error_bodies(scripted_model):
    scripted_model.set_script(Script.of("after the faults"))
    scripted_model.fail_next(Fault.rate_limited(retry_after=2.5))
    scripted_model.fail_next(Fault.server_error(503))
    body = {"model": "m", "messages": USER}
    async with httpx.AsyncClient() as http:
        limited = await http.post(f"{scripted_model.base_url}/chat/completions", json=body)
        unavailable = await http.post(f"{scripted_model.base_url}/chat/completions", json=body)
        ok = await http.post(f"{scripted_model.base_url}/chat/completions", json=body)
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "2" and limited.headers["retry-after-ms"] == "2500"
    assert limited.json()["error"]["type"] == "rate_limit_error"
    assert unavailable.status_code == 503 and "retry-after" not in unavailable.headers
    assert ok.json()["choices"][0]["message"]["content"] == "after the faults"


@pytest.mark.parametrize("stream", [False, True])
async def test_malformed_output_and_disconnects_reach_the_client_as_errors(scripted_model, sdk, stream):
    scripted_model.set_script(Script(default=Reply.say("fine")))

    async def call():
        result = await sdk.chat.completions.create(model="m", messages=USER, stream=stream)
        if stream:
            return [c async for c in result]
        return result

    scripted_model.fail_next(Fault.malformed())
    with pytest.raises(ValueError):
        await call()
    scripted_model.fail_next(Fault.disconnect())
    with pytest.raises(openai.APIConnectionError):
        await call()
    assert await call()  # the server is still healthy afterwards


async def test_invalid_requests_get_a_400_with_the_reason(scripted_model):
    async with httpx.AsyncClient() as http:
        missing = await http.post(f"{scripted_model.base_url}/chat/completions", json={"model": "m"})
        garbage = await http.post(f"{scripted_model.base_url}/chat/completions", content=b"{not json")
    assert missing.status_code == 400 and "messages" in missing.json()["error"]["message"]
    assert garbage.status_code == 400 and garbage.json()["error"]["type"] == "invalid_request_error"
    assert [r.outcome for r in scripted_model.log.requests] == ["invalid_request", "invalid_request"]


async def test_request_log_records_what_the_client_sent(scripted_model, sdk):
    scripted_model.set_script(Script.of("ok"))
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    await sdk.chat.completions.create(
        model="m", messages=[{"role": "system", "content": "be brief"}, *USER], tools=tools, temperature=0.2
    )
    entry = scripted_model.log.wait_for(1)[0]
    assert entry.roles == ["system", "user"] and entry.tool_names == ["get_weather"]
    assert entry.body["temperature"] == 0.2
    assert entry.headers["authorization"] == "Bearer test-key"
    assert entry.reply == Reply.say("ok") and entry.status == 200


async def test_models_health_and_azure_deployment_route(scripted_model):
    scripted_model.set_script(Script.of("from azure route"))
    azure = openai.AsyncAzureOpenAI(
        azure_endpoint=scripted_model.url, azure_deployment="my-dep", api_version="2024-10-21", api_key="az-key"
    )
    completion = await azure.chat.completions.create(model="my-dep", messages=USER)
    await azure.close()
    assert completion.choices[0].message.content == "from azure route"
    entry = scripted_model.log.last
    assert entry.path == "/openai/deployments/my-dep/chat/completions"
    assert entry.query == {"api-version": "2024-10-21"} and entry.headers["api-key"] == "az-key"
    async with httpx.AsyncClient() as http:
        models = (await http.get(f"{scripted_model.base_url}/models")).json()
        health = (await http.get(f"{scripted_model.url}/health")).json()
    assert models["data"][0]["id"] == "scripted-model"
    assert health["status"] == "ok"


def test_script_loads_from_json_and_rejects_bad_patterns(tmp_path):
    script = Script.from_file(FIXTURES / "weather_script.json")
    assert script.rules[0].match.last_user == "weather"
    assert script.turns[-1].fault == Fault.rate_limited(retry_after=1)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rules": [{"match": {"last_user": "("}, "reply": {"text": "x"}}]}))
    with pytest.raises(ValueError):
        Script.from_file(bad)


async def test_reply_latency_is_reported_by_the_engine(scripted_model):
    scripted_model.latency_ms = 5
    scripted_model.set_script(Script.of(Reply(text="slow", latency_ms=250), "default latency"))
    from scripted_model import ChatCompletionRequest

    request = ChatCompletionRequest(model="m", messages=USER)
    assert scripted_model.engine.decide(request).latency_s == 0.25
    assert scripted_model.engine.decide(request).latency_s == 0.005


async def test_hundreds_of_concurrent_requests_all_succeed(scripted_model, sdk):
    scripted_model.set_script(Script(default=Reply.say("pong")))
    results = await asyncio.gather(
        *(sdk.chat.completions.create(model="m", messages=USER, stream=i % 2 == 0) for i in range(200))
    )
    plain = [r for r in results if not isinstance(r, openai.AsyncStream)]
    assert all(r.choices[0].message.content == "pong" for r in plain)
    for stream in (r for r in results if isinstance(r, openai.AsyncStream)):
        assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices]) == "pong"
    assert scripted_model.log.total == 200


async def test_server_runs_on_the_callers_loop_and_frees_its_port():
    server = ScriptedModelServer(Script.of("on this loop"))
    async with server:
        port = server.port
        async with httpx.AsyncClient() as http:
            reply = await http.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": USER})
        assert reply.json()["choices"][0]["message"]["content"] == "on this loop"
    with pytest.raises(RuntimeError):
        _ = server.port
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"http://127.0.0.1:{port}/health")


async def test_a_failing_responder_answers_500_and_the_server_keeps_serving(scripted_model, sdk):
    class Broken:
        def respond(self, conversation):
            raise RuntimeError("brain bug")

    scripted_model.set_script(Broken())
    with pytest.raises(openai.InternalServerError) as info:
        await sdk.chat.completions.create(model="m", messages=USER)
    assert "RuntimeError: brain bug" in info.value.message
    scripted_model.set_script(Script.of("recovered"))
    assert (await sdk.chat.completions.create(model="m", messages=USER)).choices[0].message.content == "recovered"


async def test_request_log_is_bounded_but_counts_everything():
    async with ScriptedModelServer(Script(default=Reply.say("x")), max_log_entries=3) as server:
        async with httpx.AsyncClient() as http:
            for _ in range(5):
                await http.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": USER})
        assert server.log.total == 5 and [r.index for r in server.log.requests] == [2, 3, 4]


async def test_a_held_call_is_logged_at_once_and_answered_on_release(scripted_model, sdk):
    scripted_model.set_script(Script.of(Reply(text="slow answer", latency_ms=20)))
    scripted_model.hold_answers()
    pending = asyncio.ensure_future(sdk.chat.completions.create(model="m", messages=USER))
    entry = (await asyncio.to_thread(scripted_model.log.wait_for, 1))[0]
    assert entry.outcome == "reply" and not pending.done()  # held: no answer can have arrived, however slow we are
    scripted_model.release_answers()
    assert (await pending).choices[0].message.content == "slow answer"


async def test_answers_held_whole_go_while_streams_stop_half_written_until_the_full_release(scripted_model, sdk):
    """Every call in flight before any answer is sent; then the fault and a stream's first chunk are sent, and the
    rest of the stream only on the full release."""
    text = "a streamed answer, written in several chunks"
    refusing = Rule(match=Match(last_user="refuse"), reply=Reply(fault=Fault.bad_request()))
    scripted_model.set_script(Script(rules=[refusing], default=Reply.say(text)))
    scripted_model.hold_answers()
    scripted_model.hold_mid_stream(after_chunks=1)
    scripted_model.chunk_times = []
    try:
        refused = asyncio.ensure_future(
            sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "refuse"}])
        )
        streamed = asyncio.ensure_future(sdk.chat.completions.create(model="m", messages=USER, stream=True))
        await asyncio.to_thread(scripted_model.log.wait_for, 2)
        scripted_model.release_answers(keep_mid_stream=True)
        with pytest.raises(openai.BadRequestError):
            await refused
        stream = await streamed
        chunks = [await anext(stream)]
        assert len(scripted_model.chunk_times) == 1  # the stream stopped after its first chunk
        scripted_model.release_answers()
        chunks += [chunk async for chunk in stream]
    finally:
        scripted_model.chunk_times = None
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text


async def test_reset_releases_held_answers(scripted_model, sdk):
    scripted_model.set_script(Script.of("first", "second"))
    scripted_model.hold_answers()
    pending = asyncio.ensure_future(sdk.chat.completions.create(model="m", messages=USER))
    await asyncio.to_thread(scripted_model.log.wait_for, 1)
    scripted_model.reset(Script.of("after reset"))
    assert (await pending).choices[0].message.content == "first"
    answer = await sdk.chat.completions.create(model="m", messages=USER)  # not held any more
    assert answer.choices[0].message.content == "after reset"


async def test_paced_streaming_delivers_the_same_chunks():
    text = "Paced streaming so a UI can show the answer arriving piece by piece."
    async with ScriptedModelServer(Script.of(text), chunk_delay_ms=1) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=10)
        stream = await client.chat.completions.create(
            model="m", messages=USER, stream=True, stream_options={"include_usage": True}
        )
        chunks = [c async for c in stream]
        await client.close()
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text
    assert len(chunks) > 4 and chunks[-1].usage is not None
