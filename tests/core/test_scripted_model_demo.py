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
from scripted_model.demo_email import email_arguments

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
    assert answer.content == "I did not send the email to alice@example.com: you rejected it (not today)."
    runtime_words = {"role": "tool", "tool_call_id": call.id,
                     "content": "Error: The user denied the call to 'send_email'"}  # no reason given
    answer = await ask(demo, [question, proposal.model_dump(exclude_none=True), runtime_words], tools=TOOLS)
    assert answer.content == "I did not send the email to alice@example.com: you rejected it."


@pytest.mark.parametrize(
    ("request_text", "to", "subject", "paragraph"),
    [
        (
            "Email bob@example.com that the report is ready",
            "bob@example.com",
            "The report is ready",
            "The report is ready.",
        ),
        ("Email bob@example.com to say hi", "bob@example.com", "Hello", "Just saying hello!"),
        (
            "Please email alice@example.com about the launch",
            "alice@example.com",
            "The launch",
            "I wanted to get in touch about the launch.",
        ),
        (
            "Send an email to carol@example.com saying the Q3 numbers are in. Let's meet on Friday.",
            "carol@example.com",
            "The Q3 numbers are in",
            "The Q3 numbers are in. Let's meet on Friday.",
        ),
        (
            "Email Dave to ask whether the build is green",
            "dave@example.com",
            "A quick question",
            "I wanted to ask whether the build is green.",
        ),
        (
            "Mail Erin to let her know that the servers are back up",
            "erin@example.com",
            "The servers are back up",
            "The servers are back up.",
        ),
        (
            "Email alice@example.com: lunch is at noon, please",
            "alice@example.com",
            "Lunch is at noon",
            "Lunch is at noon.",
        ),
    ],
)
def test_the_email_follows_the_request(request_text, to, subject, paragraph):
    name = to.split("@")[0].capitalize()
    assert email_arguments(request_text) == {
        "to": to,
        "subject": subject,
        "body": f"Hi {name},\n\n{paragraph}\n\nBest regards",
    }


def test_a_long_message_gets_a_subject_cut_at_a_word():
    arguments = email_arguments(
        "Email bob@example.com that the quarterly report for all regions and all product lines is now ready for review"
    )
    assert arguments["subject"] == "The quarterly report for all regions and all product lines..."
    assert "now ready for review." in arguments["body"]


async def turn(client, history, text):
    """One user turn against the brain, the tools answered as the demo agent would: history grows in place."""
    history.append({"role": "user", "content": text})
    for _ in range(3):
        message = await ask(client, history, tools=TOOLS)
        history.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)
            if call.function.name == "get_weather":
                content = {"city": args["city"], "condition": "sunny", "temperature_c": len(args["city"])}
            else:
                content = {"status": "sent", "to": args["to"], "subject": args["subject"]}
            history.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(content)})
    raise AssertionError("the brain kept calling tools")


async def test_follow_ups_continue_the_earlier_request_and_questions_are_answered_from_the_session(demo):
    history: list[dict] = []
    assert (await turn(demo, history, "What is the weather in Paris?")).content == "In Paris it is sunny, 5 °C."
    assert (await turn(demo, history, "And in Rome?")).content == "In Rome it is sunny, 4 °C."
    assert (await turn(demo, history, "What about Oslo and New York?")).content == (
        "In Oslo it is sunny, 4 °C.\nIn New York it is sunny, 8 °C."
    )
    warmest = (await turn(demo, history, "Which city is warmer?")).content
    assert warmest.endswith("New York is the warmest of these.")
    sent = await turn(demo, history, "Email bob@example.com that the report is ready")
    assert sent.content == 'Done: I emailed bob@example.com with the subject "The report is ready".'
    again = await turn(demo, history, "And to carol@example.com too")
    assert again.content == 'Done: I emailed carol@example.com with the subject "The report is ready".'
    last_call = json.loads(history[-3]["tool_calls"][0]["function"]["arguments"])
    assert last_call["body"] == "Hi Carol,\n\nThe report is ready.\n\nBest regards"
    recalled = (await turn(demo, history, "What did you send?")).content
    assert recalled.startswith('I sent an email to carol@example.com with the subject "The report is ready"')
    assert (await turn(demo, history, "Thanks!")).content == "You are welcome!"


async def test_a_question_about_an_email_is_not_a_request_to_send_one(demo):
    history: list[dict] = []
    answer = await turn(demo, history, "Did you email anyone?")
    assert answer.content == "I have not sent any email in this conversation yet."
    assert all(m["role"] != "tool" for m in history)


async def test_no_tools_offered_or_tool_choice_none_means_a_text_answer(demo):
    weather = [{"role": "user", "content": "weather in Oslo?"}]
    assert (await ask(demo, weather)).tool_calls is None
    assert (await ask(demo, weather, tools=TOOLS, tool_choice="none")).tool_calls is None
    chat = await ask(demo, [{"role": "user", "content": "tell me a joke"}], tools=TOOLS)
    assert chat.tool_calls is None and 'You said: "tell me a joke"' in chat.content


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
        body = {"model": "m", "messages": [{"role": "user", "content": "tell me a joke"}]}
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


async def test_a_drafting_request_gets_a_draft_and_a_review_fits_its_schema(demo):
    """"Write ..." is a drafting request, not a question about emails; a review asked for as structured output
    judges the draft within the schema's bounds and names it."""
    draft = (await ask(demo, [{"role": "user", "content": "Write a short draft about tide pools."}])).content
    assert draft.startswith("Tide pools: a short introduction\n\n") and "email" not in draft
    schema = {
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": ["reject", "accept"]},
            "rating": {"type": "integer", "minimum": 1, "maximum": 5},
            "feedback": {"type": "string", "maxLength": 40},
            "reviewer": {"type": "string"},
        },
        "required": ["decision", "rating", "feedback", "reviewer"],
        "additionalProperties": False,
    }
    response_format = {"type": "json_schema", "json_schema": {"name": "review", "schema": schema}}
    review = await ask(demo, [{"role": "user", "content": f"Review this draft:\n\n{draft}"}],
                       response_format=response_format)
    assert json.loads(review.content) == {
        "decision": "reject", "rating": 3, "feedback": '"Tide pools: a short introduction" is', "reviewer": "example"
    }
    good = f"Review this draft:\n\n{draft}\n\nFor example: a pool at low tide."
    review = await ask(demo, [{"role": "user", "content": good}], response_format=response_format)
    assert json.loads(review.content)["decision"] == "accept" and json.loads(review.content)["rating"] == 4
