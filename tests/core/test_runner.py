"""The in-process runner end to end: the real openai client against the scripted model server."""

import pytest
from pydantic import BaseModel

from agent_runtime.agents import AgentDefinition
from agent_runtime.conversation import InMemoryConversationLog
from agent_runtime.loop_types import RequiredFunction
from agent_runtime.messages import FunctionApprovalRequestContent, unanswered_function_calls
from agent_runtime.middleware import AuditLogMiddleware, RetryMiddleware
from agent_runtime.models.retry import RetryPolicy
from agent_runtime.runner import AgentRunner
from agent_runtime.tools import tool
from scripted_model import Fault, Reply, Script
from scripted_model.script import ScriptedToolCall


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return {"Oslo": "rain, 7°C", "Rome": "sun, 24°C"}.get(city, "unknown")


@tool
def get_time(city: str) -> str:
    """Local time in a city."""
    return "14:05"


@tool(approval="always")
def send_email(to: str, subject: str, body: str = "") -> str:
    """Send an email."""
    return f"sent '{subject}' to {to}"


def calls(*items: tuple[str, dict, str]) -> Reply:
    return Reply(tool_calls=[ScriptedToolCall(name=n, arguments=a, id=i) for n, a, i in items])


def tool_messages(request) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request.messages if m["role"] == "tool"}


def weather_agent(**fields) -> AgentDefinition:
    return AgentDefinition(name="assistant", instructions="Help.", tools=[get_weather, get_time, send_email], **fields)


async def test_multi_tool_conversation_completes(scripted_model, model_client):
    scripted_model.set_script(
        Script.of(
            calls(("get_weather", {"city": "Oslo"}, "w1"), ("get_weather", {"city": "Rome"}, "w2")),
            calls(("get_time", {"city": "Rome"}, "t1")),
            "Oslo: rain. Rome: sun, and it is 14:05 there.",
        )
    )
    result = await AgentRunner(weather_agent(), model_client).run("Weather in Oslo and Rome? Time in Rome?")
    assert (result.status, result.reason) == ("completed", "stop")
    assert result.text == "Oslo: rain. Rome: sun, and it is 14:05 there."
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]
    assert result.usage.total_tokens > 0
    requests = scripted_model.log.requests
    assert len(requests) == 3
    assert tool_messages(requests[1]) == {"w1": "rain, 7°C", "w2": "sun, 24°C"}
    assert tool_messages(requests[2])["t1"] == "14:05"


async def test_approvals_pause_the_run_and_partial_decisions_resume_it(scripted_model, model_client):
    scripted_model.set_script(
        Script.of(
            calls(
                ("get_weather", {"city": "Oslo"}, "w1"),
                ("send_email", {"to": "ann@example.com", "subject": "Rain"}, "e1"),
                ("send_email", {"to": "bob@example.com", "subject": "Rain"}, "e2"),
            ),
            "Done.",
        )
    )
    log = InMemoryConversationLog()
    runner = AgentRunner(weather_agent(), model_client, log)
    paused = await runner.run("Tell Ann and Bob about Oslo's weather")
    assert (paused.status, paused.reason) == ("requires_action", "awaiting_approval")
    assert [r.function_call.call_id for r in paused.pending_approvals] == ["e1", "e2"]
    assert len(scripted_model.log) == 1
    # nothing of the batch ran while waiting: the model will see all three results together
    assert {c.call_id for c in unanswered_function_calls(await log.messages())} == {"w1", "e1", "e2"}

    ann, bob = paused.pending_approvals
    still = await runner.resume(
        paused, [ann.create_approval(arguments={"to": "ann@example.com", "subject": "Umbrella!"})]
    )
    assert still.status == "requires_action"
    assert [r.function_call.call_id for r in still.pending_approvals] == ["e2"]

    done = await runner.resume(still, [bob.create_rejection("Bob is on holiday")])
    assert (done.status, done.text) == ("completed", "Done.")
    sent = tool_messages(scripted_model.log.last)
    assert sent == {
        "w1": "rain, 7°C",
        "e1": "sent 'Umbrella!' to ann@example.com",  # approved with edited arguments
        "e2": "Error: The user denied the call to 'send_email': Bob is on holiday",
    }


async def test_approver_callback_decides_in_process(scripted_model, model_client):
    scripted_model.set_script(Script.of(calls(("send_email", {"to": "a@b.c", "subject": "Hi"}, "e1")), "Sent."))
    seen: list[FunctionApprovalRequestContent] = []

    async def approver(request):
        seen.append(request)
        return request.create_approval()

    result = await AgentRunner(weather_agent(), model_client, approver=approver).run("email a@b.c")
    assert (result.status, result.text) == ("completed", "Sent.")
    assert [r.function_call.name for r in seen] == ["send_email"]


async def test_tool_choice_required_returns_after_the_tools(scripted_model, model_client):
    scripted_model.set_script(Script.of(calls(("get_weather", {"city": "Oslo"}, "w1"))))
    agent = weather_agent(tool_choice=RequiredFunction(required_function_name="get_weather"))
    result = await AgentRunner(agent, model_client).run("Oslo?")
    assert (result.status, result.reason) == ("completed", "tool_choice_required")
    assert [m.role for m in result.messages] == ["user", "assistant", "tool"]
    assert len(scripted_model.log) == 1
    assert scripted_model.log.last.body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


async def test_iteration_budget_ends_with_a_call_without_tools(scripted_model, model_client):
    scripted_model.set_script(
        Script(
            turns=[calls(("get_time", {"city": "Rome"}, f"t{i}")) for i in range(2)] + [Reply.say("Giving up: 14:05.")]
        )
    )
    result = await AgentRunner(weather_agent(max_iterations=2), model_client).run("time?")
    assert (result.status, result.reason, result.text) == ("completed", "max_iterations", "Giving up: 14:05.")
    assert [r.body.get("tool_choice") for r in scripted_model.log.requests] == ["auto", "auto", "none"]


async def test_rate_limit_is_retried_after_the_servers_retry_after(scripted_model, model_client):
    delays: list[float] = []

    async def fake_sleep(delay: float) -> None:
        delays.append(delay)

    scripted_model.set_script(Script.of("Hello!"))
    scripted_model.fail_next(Fault.rate_limited(retry_after=3))
    agent = AgentDefinition(
        name="plain", chat_middleware=[RetryMiddleware(RetryPolicy(max_attempts=2), sleep=fake_sleep)]
    )
    result = await AgentRunner(agent, model_client).run("hi")
    assert (result.status, result.text) == ("completed", "Hello!")
    assert delays == [3.0]
    assert [r.status for r in scripted_model.log.requests] == [429, 200]


async def test_bad_request_fails_the_run_fast(scripted_model, model_client):
    scripted_model.set_script(Script.of(Reply.fail(Fault.bad_request("model 'x' does not exist"))))
    agent = AgentDefinition(name="plain", chat_middleware=[RetryMiddleware()])
    result = await AgentRunner(agent, model_client).run("hi")
    assert result.status == "failed"
    assert "model 'x' does not exist" in result.reason
    assert len(scripted_model.log) == 1


class Weather(BaseModel):
    city: str
    celsius: int


async def test_structured_output_is_parsed(scripted_model, model_client):
    scripted_model.set_script(Script.of(Reply(json_output={"city": "Oslo", "celsius": 7})))
    result = await AgentRunner(AgentDefinition(name="typed", output_type=Weather), model_client).run("Oslo?")
    assert result.value == Weather(city="Oslo", celsius=7)
    assert scripted_model.log.last.body["response_format"]["type"] == "json_schema"


async def test_invalid_structured_output_fails_the_run(scripted_model, model_client):
    scripted_model.set_script(Script.of(Reply(json_output={"city": "Oslo"})))
    result = await AgentRunner(AgentDefinition(name="typed", output_type=Weather), model_client).run("Oslo?")
    assert result.status == "failed"
    assert result.code == "invalid_structured_output" and "celsius" in result.reason


async def test_run_middleware_wraps_the_whole_run(scripted_model, model_client):
    records: list[dict] = []
    scripted_model.set_script(Script.of(calls(("get_time", {"city": "Rome"}, "t1")), "14:05"))
    agent = weather_agent(
        run_middleware=[AuditLogMiddleware(records.append)], function_middleware=[AuditLogMiddleware(records.append)]
    )
    result = await AgentRunner(agent, model_client, session_id="s-1").run("time?", run_id="r-1")
    assert result.run_id == "r-1"
    assert [(r["event"], r["outcome"]) for r in records] == [("tool_call", "ok"), ("run", "ok")]
    assert records[1]["session_id"] == "s-1"


async def test_a_second_run_in_the_same_session_sees_the_history(scripted_model, model_client):
    log = InMemoryConversationLog()
    scripted_model.set_script(Script.of("first answer", "second answer"))
    runner = AgentRunner(AgentDefinition(name="plain"), model_client, log)
    await runner.run("one")
    second = await runner.run("two")
    assert [m.text for m in second.messages] == ["two", "second answer"]
    assert scripted_model.log.last.roles == ["user", "assistant", "user"]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_model_failure_mid_run_fails_the_run(scripted_model, model_client, stream):
    updates = []

    async def on_update(update):
        updates.append(update)

    scripted_model.set_script(Script.of(calls(("get_time", {"city": "Rome"}, "t1")), Reply.fail(Fault(status=401))))
    log = InMemoryConversationLog()
    runner = AgentRunner(weather_agent(), model_client, log, on_update=on_update if stream else None)
    result = await runner.run("time?")
    assert result.status == "failed"
    assert unanswered_function_calls(await log.messages()) == []
    assert bool(updates) is stream


async def test_cancelling_a_paused_run_closes_its_waiting_calls(scripted_model, model_client):
    scripted_model.set_script(
        Script.of(calls(("get_time", {"city": "Rome"}, "t1"), ("send_email", {"to": "a@b.c", "subject": "x"}, "e1")))
    )
    log = InMemoryConversationLog()
    runner = AgentRunner(weather_agent(), model_client, log)
    paused = await runner.run("time, then email")
    cancelled = await runner.cancel(paused, "user cancelled")
    assert (cancelled.status, cancelled.reason) == ("cancelled", "user cancelled")
    results = {r.call_id: r.error for m in await log.messages() for r in m.function_results}
    assert results == {
        "t1": "Not run: the run ended (cancelled: user cancelled) before this call was executed.",
        "e1": "Not run: the run ended (cancelled: user cancelled) before this call was executed.",
    }
    with pytest.raises(ValueError, match="only a paused run"):
        await runner.cancel(cancelled)


async def test_reused_call_ids_from_a_compatible_server_do_not_collide(scripted_model, model_client):
    # some OpenAI-compatible servers answer "call_0" in every response
    scripted_model.set_script(
        Script.of(
            calls(("get_weather", {"city": "Oslo"}, "call_0")),
            calls(("get_weather", {"city": "Rome"}, "call_0")),
            "Oslo rain, Rome sun.",
        )
    )
    log = InMemoryConversationLog()
    result = await AgentRunner(weather_agent(), model_client, log).run("Oslo then Rome", run_id="r")
    assert result.status == "completed"
    results = [r.result for m in await log.messages() for r in m.function_results]
    assert results == ["rain, 7°C", "sun, 24°C"]
    assert tool_messages(scripted_model.log.last) == {"call_0": "rain, 7°C", "call_r-2-0-0": "sun, 24°C"}


async def test_demo_brain_drives_the_demo_agent_shape(scripted_model, model_client):
    from scripted_model.demo import DemoBrain

    scripted_model.set_script(DemoBrain())
    log = InMemoryConversationLog()
    runner = AgentRunner(weather_agent(), model_client, log)
    weather = await runner.run("What's the weather in Oslo and Rome?")
    assert weather.status == "completed"
    assert sorted(r.result for m in weather.messages for r in m.function_results) == ["rain, 7°C", "sun, 24°C"]
    assert "rain, 7°C" in weather.text and "sun, 24°C" in weather.text

    paused = await runner.run("Please email ann@example.com about the picnic.")
    assert [r.function_call.name for r in paused.pending_approvals] == ["send_email"]
    done = await runner.resume(paused, [paused.pending_approvals[0].create_approval()])
    assert done.status == "completed"
    assert [r.result for m in done.messages for r in m.function_results] == [
        f"sent '{paused.pending_approvals[0].function_call.arguments['subject']}' to ann@example.com"
    ]


async def test_a_chat_middleware_refusal_fails_the_run_with_its_reason(scripted_model, model_client):
    from agent_runtime.middleware import UsageAccountingMiddleware

    scripted_model.set_script(Script.of(calls(("get_time", {"city": "Rome"}, "t1")), "14:05"))
    agent = weather_agent(chat_middleware=[UsageAccountingMiddleware(max_total_tokens=1)])
    result = await AgentRunner(agent, model_client).run("time?")
    assert result.status == "failed"
    assert result.reason.startswith("model call failed: UsageBudgetExceeded: token budget of 1 used up")
    assert len(scripted_model.log) == 1


async def test_parallel_tool_calls_run_concurrently(scripted_model, model_client):
    import asyncio

    ping_seen = asyncio.Event()

    @tool(timeout=5)
    async def wait_for_ping() -> str:
        await ping_seen.wait()  # only finishes if `ping` runs while this one is waiting
        return "pinged"

    @tool
    async def ping() -> str:
        ping_seen.set()
        return "pong"

    scripted_model.set_script(Script.of(calls(("wait_for_ping", {}, "a"), ("ping", {}, "b")), "both done"))
    agent = AgentDefinition(name="concurrent", tools=[wait_for_ping, ping])
    result = await AgentRunner(agent, model_client).run("go")
    # results are stored as they complete: `ping` finished first
    assert [r.result for m in result.messages for r in m.function_results] == ["pong", "pinged"]
