"""The demo brain (what the offline demo's `assistant` agent talks to) and `python -m scripted_model`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest

from scripted_model import DemoBrain, start_demo_server

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "send_email",
            "parameters": {
                "type": "object",
                "properties": {"to": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"}},
                "required": ["to", "subject", "body"],
            },
        },
    },
]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def demo(scripted_model):
    scripted_model.set_script(DemoBrain())
    client = openai.AsyncOpenAI(base_url=scripted_model.base_url, api_key="unused", max_retries=0, timeout=10)
    yield client
    await client.close()


async def ask(client, messages, **options):
    completion = await client.chat.completions.create(model="scripted-model", messages=messages, **options)
    return completion.choices[0].message


async def test_weather_question_calls_get_weather_per_city_then_answers_with_the_results(demo):
    question = {"role": "user", "content": "What's the weather in Paris and New York today?"}
    proposal = await ask(demo, [question], tools=TOOLS)
    calls = proposal.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "New York"}),
    ]
    results = [
        {"role": "tool", "tool_call_id": calls[0].id, "content": "Paris: 18 C, sunny"},
        {"role": "tool", "tool_call_id": calls[1].id, "content": "New York: 9 C, rain"},
    ]
    answer = await ask(demo, [question, proposal.model_dump(exclude_none=True), *results], tools=TOOLS)
    assert answer.tool_calls is None
    assert "Paris: 18 C, sunny" in answer.content and "New York: 9 C, rain" in answer.content


async def test_email_request_calls_send_email_and_reports_a_denial(demo):
    question = {"role": "user", "content": "Please email alice@example.com about the launch"}
    proposal = await ask(demo, [question], tools=TOOLS)
    call = proposal.tool_calls[0]
    arguments = json.loads(call.function.arguments)
    assert call.function.name == "send_email"
    assert arguments["to"] == "alice@example.com" and arguments["subject"] == "The launch" and arguments["body"]
    denied = {"role": "tool", "tool_call_id": call.id, "content": "Error: the call was denied: not today"}
    answer = await ask(demo, [question, proposal.model_dump(exclude_none=True), denied], tools=TOOLS)
    assert "could not complete send_email" in answer.content and "not today" in answer.content


async def test_no_tools_offered_or_tool_choice_none_means_a_text_answer(demo):
    weather = [{"role": "user", "content": "weather in Oslo?"}]
    assert (await ask(demo, weather)).tool_calls is None
    assert (await ask(demo, weather, tools=TOOLS, tool_choice="none")).tool_calls is None
    chat = await ask(demo, [{"role": "user", "content": "hi there"}], tools=TOOLS)
    assert chat.tool_calls is None and 'You said: "hi there"' in chat.content


async def test_demo_brain_streams(demo):
    stream = await demo.chat.completions.create(
        model="scripted-model",
        messages=[{"role": "user", "content": "weather in Lima"}],
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    fragments = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
    assert json.loads("".join(f.function.arguments or "" for f in fragments)) == {"city": "Lima"}
    assert chunks[-1].usage is not None


def test_cli_serves_the_demo_brain_until_terminated():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-m", "scripted_model", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        line = process.stdout.readline()  # blocks until the server prints its address (or exits)
        assert line.startswith("scripted-model listening on "), process.stderr.read()
        base_url = line.rsplit(" ", 1)[1].strip()
        body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
        reply = httpx.post(f"{base_url}/chat/completions", json=body, timeout=10)
        assert "You said" in reply.json()["choices"][0]["message"]["content"]
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stderr.close()
    assert process.returncode == 0


async def test_start_demo_server_serves_the_brain_with_the_configured_latency():
    server = start_demo_server(latency_ms=1)
    try:
        assert server.latency_ms == 1 and isinstance(server.engine.responder, DemoBrain)
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        reply = await ask(client, [{"role": "user", "content": "weather in Oslo?"}], tools=TOOLS)
        await client.close()
        assert reply.tool_calls[0].function.name == "get_weather"
    finally:
        server.stop()
