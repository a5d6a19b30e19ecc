"""The OpenAI Agents SDK (`openai-agents`, `import agents`) against the app on devhost, as a new user would use it:
`OpenAIResponsesModel` over `AsyncOpenAI(base_url=".../api/v1")`, on both stores.

The SDK needs a newer urllib3 than the app's lock pins, so it lives in an environment of its own
(`make test-openai-agents`: `.venv-openai-agents`, the app's environment plus tests/requirements-openai-agents.txt).
Elsewhere these tests skip, unless REQUIRE_OPENAI_AGENTS=1 says the SDK must be there.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from e2e_harness import InProcessApp
from pydantic import BaseModel

from scripted_model import Reply, Script, ScriptedModelServer

try:
    import agents
    from agents import Agent, Runner, set_tracing_disabled
    from agents.models.openai_responses import OpenAIResponsesModel
except ImportError:  # not the SDK's environment
    if os.environ.get("REQUIRE_OPENAI_AGENTS") == "1":
        raise
    pytest.skip("the OpenAI Agents SDK is not installed here (make test-openai-agents)", allow_module_level=True)

import openai
from openai import AsyncOpenAI

T = TypeVar("T")
set_tracing_disabled(True)  # the SDK would export traces to OpenAI


def sdk_agent(app: InProcessApp, name: str = "helper", **options: Any) -> Agent[Any]:
    client = AsyncOpenAI(
        base_url=f"{app.host.base_url}/api/v1",
        api_key="unused",
        http_client=httpx.AsyncClient(timeout=300, trust_env=False),
        max_retries=0,
    )
    return Agent(name=name, model=OpenAIResponsesModel(model=name, openai_client=client), **options)


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(scenario())  # type: ignore[arg-type]


def run_of(response_id: str | None) -> str:
    return (response_id or "").removeprefix("resp_").split("_")[0]


def test_the_sdk_imports_next_to_the_app(app: InProcessApp) -> None:
    """`import agents` is the SDK, and the app (its agents are `served_agents`) loads and serves in the same
    process."""
    assert Path(agents.__file__).parent.parent.name == "site-packages"
    assert hasattr(agents, "Runner") and hasattr(agents, "HostedMCPTool")
    served = importlib.import_module("served_agents")
    assert Path(served.__file__).parent.parent == Path(__file__).resolve().parents[2]
    assert "function_app" in sys.modules  # the host loaded the app's function_app.py in this process
    assert app.http.get("/api/health").status_code == 200


def test_multi_turn_with_to_input_list(app: InProcessApp, model: ScriptedModelServer) -> None:
    """The SDK's standard multi-turn (`result.to_input_list() + [a new message]`) continues the same conversation:
    after a tool turn and after a text turn, the model sees each message once."""
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), "a is value-of-a.", "b comes after a.", "Bye."))
    agent = sdk_agent(app)

    async def scenario() -> list[Any]:
        first = await Runner.run(agent, "What is a?")
        second = await Runner.run(agent, [*first.to_input_list(), {"role": "user", "content": "And b?"}])
        third = await Runner.run(agent, [*second.to_input_list(), {"role": "user", "content": "Thanks."}])
        return [first, second, third]

    first, second, third = run(scenario)
    assert (first.final_output, second.final_output, third.final_output) == (
        "a is value-of-a.", "b comes after a.", "Bye."
    )
    ids = [r.last_response_id for r in (first, second, third)]
    sessions = {app.view(run_of(i))["session_id"] for i in ids}
    assert len(sessions) == 1 and len(set(ids)) == 3  # one conversation, three runs
    assert texts_sent(model) == ["What is a?", "a is value-of-a.", "And b?", "b comes after a.", "Thanks."]


def texts_sent(model: ScriptedModelServer) -> list[Any]:
    """The user and assistant texts of the model's last request."""
    sent = model.log.last.messages
    return [m.get("content") for m in sent if m["role"] in ("user", "assistant") and m.get("content")]


def test_chained_with_previous_response_id(app: InProcessApp, model: ScriptedModelServer) -> None:
    """`previous_response_id=result.last_response_id` turn after turn, and `auto_previous_response_id=True`: one
    conversation, each message sent to the model once."""
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), "a is value-of-a.", "b comes after a.", "Bye."))
    agent = sdk_agent(app)

    async def scenario() -> list[Any]:
        first = await Runner.run(agent, "What is a?", auto_previous_response_id=True)
        second = await Runner.run(agent, "And b?", previous_response_id=first.last_response_id)
        third = await Runner.run(agent, "Thanks.", previous_response_id=second.last_response_id)
        return [first, second, third]

    results = run(scenario)
    assert [r.final_output for r in results] == ["a is value-of-a.", "b comes after a.", "Bye."]
    assert len({app.view(run_of(r.last_response_id))["session_id"] for r in results}) == 1
    assert texts_sent(model) == ["What is a?", "a is value-of-a.", "And b?", "b comes after a.", "Thanks."]


def test_a_session_feeds_the_conversation_back(app: InProcessApp, model: ScriptedModelServer) -> None:
    """`SQLiteSession` (the SDK's client-side memory: each run sends the stored items again) continues one
    conversation here, approvals answered through `on_approval_request` included."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent.", "You are welcome."))
    agent = sdk_agent(app, tools=[hosted_tool(on_approval_request=lambda _: {"approve": True})])
    session = agents.SQLiteSession("memory")

    async def scenario() -> list[Any]:
        return [await Runner.run(agent, "Email Bob", session=session),
                await Runner.run(agent, "Thanks.", session=session)]

    first, second = run(scenario)
    assert (first.final_output, second.final_output) == ("Sent.", "You are welcome.")
    session_id = app.view(run_of(first.last_response_id))["session_id"]
    assert app.view(run_of(second.last_response_id))["session_id"] == session_id
    assert app.effects(session_id, "email") == [EMAIL_BOB]
    assert texts_sent(model) == ["Email Bob", "Sent.", "Thanks."]


def test_streamed_events_to_the_end(app: InProcessApp, model: ScriptedModelServer) -> None:
    """`Runner.run_streamed`: the agent, the raw response events to `response.completed`, then the run items (the
    tool call and the message); `final_output` once the events are read."""
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), "a is value-of-a."))
    agent = sdk_agent(app)

    async def scenario() -> tuple[Any, list[tuple[str, str]]]:
        result = Runner.run_streamed(agent, "What is a?")
        seen = []
        async for event in result.stream_events():
            detail = event.data.type if event.type == "raw_response_event" else getattr(event, "name", "")
            seen.append((event.type, detail))
        return result, seen

    result, seen = run(scenario)
    assert seen[0] == ("agent_updated_stream_event", "")
    raw = [d for kind, d in seen if kind == "raw_response_event"]
    assert raw[:2] == ["response.created", "response.in_progress"] and raw[-1] == "response.completed"
    assert {"response.mcp_call.completed", "response.output_text.delta"} <= set(raw)
    assert [d for kind, d in seen if kind == "run_item_stream_event"] == ["tool_called", "message_output_created"]
    assert result.final_output == "a is value-of-a."


class Weather(BaseModel):
    city: str
    temperature: int


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
def test_output_type_is_structured_output(app: InProcessApp, model: ScriptedModelServer, streamed: bool) -> None:
    """`output_type=` a pydantic model: the SDK's `text.format` json_schema reaches the model, the answer comes back
    as the model's instance; an answer that does not fit fails the run, which the SDK raises as
    `ModelBehaviorError` naming our code."""
    model.set_script(Script.of('{"city": "Paris", "temperature": 21}', '{"city": "Paris"}'))

    async def go() -> Any:
        agent = sdk_agent(app, output_type=Weather)  # a client per event loop
        if streamed:
            return await finish(Runner.run_streamed(agent, "Weather in Paris?"))
        return await Runner.run(agent, "Weather in Paris?")

    assert run(go).final_output == Weather(city="Paris", temperature=21)
    schema = model.log.last.body["response_format"]["json_schema"]["schema"]  # type: ignore[index]
    assert schema["required"] == ["city", "temperature"]
    with pytest.raises(agents.ModelBehaviorError, match=r"response\.failed.*invalid_structured_output"):
        run(go)


def test_max_turns_counts_responses(app: InProcessApp, model: ScriptedModelServer) -> None:
    """`max_turns` counts responses: tool calls run on the server inside one (`max_turns=1` is enough), an answer to
    approval requests is one more (`MaxTurnsExceeded`; the run waits for its decision here)."""
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), Reply.call("lookup", {"key": "b"}), "Done.",
                               Reply.call("send_email", EMAIL_BOB), "Sent."))
    answering = sdk_agent(app, tools=[hosted_tool(on_approval_request=lambda _: {"approve": True})])
    assert run(lambda: Runner.run(sdk_agent(app), "Look a and b up", max_turns=1)).final_output == "Done."
    with pytest.raises(agents.MaxTurnsExceeded):
        run(lambda: Runner.run(answering, "Email Bob", max_turns=1))
    [waiting] = [r for r in app.http.get("/api/runs").json()["runs"] if r["status"] == "requires_action"]
    assert app.effects(waiting["session_id"], "email") == []


def test_conversation_id_is_refused_naming_what_to_use(app: InProcessApp, model: ScriptedModelServer) -> None:
    """`Runner.run(..., conversation_id=...)` (OpenAI's Conversations API, which this server does not have) is a 400
    naming `conversation` that says how to chain turns here, `OpenAIConversationsSession` a 404; nothing starts."""
    model.set_script(Script.of("Hi."))
    agent = sdk_agent(app)
    with pytest.raises(openai.BadRequestError) as refused:
        run(lambda: Runner.run(agent, "Hello", conversation_id="conv_123"))
    assert refused.value.param == "conversation" and refused.value.code == "unsupported_parameter"
    assert "previous_response_id" in refused.value.message and "input" in refused.value.message
    # The SDK's session on the Conversations API: OpenAI's 404 for a route not served (a client-side one works).
    client = AsyncOpenAI(base_url=f"{app.host.base_url}/api/v1", api_key="unused",
                         http_client=httpx.AsyncClient(trust_env=False), max_retries=0)
    with pytest.raises(openai.NotFoundError, match=r"Invalid URL \(POST /v1/conversations\)"):
        session = agents.OpenAIConversationsSession(openai_client=client)
        run(lambda: Runner.run(sdk_agent(app), "Hello", session=session))
    assert model.log.total == 0


def test_only_the_responses_api_over_http(app: InProcessApp, model: ScriptedModelServer) -> None:
    """The SDK's other model transports are not served, and say so at once: Chat Completions
    (`OpenAIChatCompletionsModel`) is OpenAI's 404 `Invalid URL`, the websocket transport (`OpenAIResponsesWSModel`)
    is refused with HTTP 404 at its handshake."""
    from agents import OpenAIChatCompletionsModel
    from agents.models.openai_responses import OpenAIResponsesWSModel

    model.set_script(Script.of("Hi."))
    for transport, refusal in ((OpenAIChatCompletionsModel, r"404 - Invalid URL \(POST /v1/chat/completions\)"),
                               (OpenAIResponsesWSModel, "HTTP 404")):
        client = AsyncOpenAI(base_url=f"{app.host.base_url}/api/v1", api_key="unused",
                             http_client=httpx.AsyncClient(trust_env=False), max_retries=0)
        agent = Agent(name="helper", model=transport(model="helper", openai_client=client))
        with pytest.raises(Exception, match=refusal):
            run(lambda agent=agent: Runner.run(agent, "Hello"))
    assert model.log.total == 0


EMAIL_BOB = {"to": "bob@example.com", "subject": "Hi", "body": "Hello Bob"}
EMAIL_EVE = {"to": "eve@example.com", "subject": "Hi", "body": "Hello Eve"}


def hosted_tool(**options: Any) -> Any:
    """The agent's own tools as the SDK declares a hosted MCP server (label = the agent's name)."""
    return agents.HostedMCPTool(tool_config={"type": "mcp", "server_label": "helper"}, **options)


async def finish(result: Any) -> Any:
    """A streamed result, read to its end (the SDK fills in the result as the events go by)."""
    async for _ in result.stream_events():
        pass
    return result


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
def test_approval_through_on_approval_request(app: InProcessApp, model: ScriptedModelServer, streamed: bool) -> None:
    """`HostedMCPTool(on_approval_request=...)`: the SDK answers our approval request itself; the same durable run
    continues and the tool runs once."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    asked: list[str] = []

    def approve(request: Any) -> dict[str, Any]:
        asked.append(request.data.name)
        return {"approve": True}

    agent = sdk_agent(app, tools=[hosted_tool(on_approval_request=approve)])

    async def scenario() -> Any:
        if streamed:
            return await finish(Runner.run_streamed(agent, "Email Bob"))
        return await Runner.run(agent, "Email Bob")

    result = run(scenario)
    assert (result.final_output, asked) == ("Sent.", ["send_email"])
    run_id = run_of(result.last_response_id)
    assert app.view(run_id)["status"] == "completed"
    assert app.effects(app.view(run_id)["session_id"], "email") == [EMAIL_BOB]
    [record] = app.approvals(run_id)
    assert record["status"] == "approved"


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
def test_approvals_as_interruptions(app: InProcessApp, model: ScriptedModelServer, streamed: bool) -> None:
    """Without a callback our approval requests are the run's interruptions: two in one turn, one approved and one
    rejected with a reason (`state.approve` / `state.reject`), then `Runner.run(agent, state)` resumes the same
    durable run: one email went out, the model was told why the other did not."""
    both = Reply(tool_calls=[*Reply.call("send_email", EMAIL_BOB).tool_calls,
                             *Reply.call("send_email", EMAIL_EVE).tool_calls])
    model.set_script(Script.of(both, "Bob's went out, Eve's did not."))
    agent = sdk_agent(app, tools=[hosted_tool()])

    async def go(start: Any) -> Any:
        if streamed:
            return await finish(Runner.run_streamed(agent, start))
        return await Runner.run(agent, start)

    async def scenario() -> tuple[Any, Any]:
        first = await go("Email Bob and Eve")
        assert len(first.interruptions) == 2 and first.final_output is None
        state = first.to_state()
        for item in first.interruptions:
            if json.loads(item.raw_item.arguments)["to"] == "bob@example.com":
                state.approve(item)
            else:
                state.reject(item, rejection_message="Eve is on leave")
        return first, await go(state)

    first, second = run(scenario)
    assert second.final_output == "Bob's went out, Eve's did not."
    run_id = run_of(second.last_response_id)
    assert run_id == run_of(first.last_response_id)  # the same durable run continued
    session_id = app.view(run_id)["session_id"]
    assert app.effects(session_id, "email") == [EMAIL_BOB]
    decisions = {a["arguments"]["to"]: (a["status"], a["reason"]) for a in app.approvals(run_id)}
    assert decisions == {"bob@example.com": ("approved", None), "eve@example.com": ("rejected", "Eve is on leave")}
    tool_results = [m for m in model.log.last.messages if m["role"] == "tool"]
    assert any("Eve is on leave" in str(m["content"]) for m in tool_results)


def test_a_new_message_while_approvals_wait(app: InProcessApp, model: ScriptedModelServer) -> None:
    """A new message instead of an answer to the interruptions (chained, or as an input list) is a 400 that says
    what to do: answer them, or cancel the response; once cancelled, the conversation goes on from it."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Fine, I will not."))
    agent = sdk_agent(app, tools=[hosted_tool()])

    async def scenario() -> tuple[list[openai.BadRequestError], Any]:
        first = await Runner.run(agent, "Email Bob")
        refused = []
        for attempt in (Runner.run(agent, "Never mind", previous_response_id=first.last_response_id),
                        Runner.run(agent, [*first.to_input_list(), {"role": "user", "content": "Never mind"}])):
            with pytest.raises(openai.BadRequestError) as error:
                await attempt
            refused.append(error.value)
        client = AsyncOpenAI(base_url=f"{app.host.base_url}/api/v1", api_key="unused",
                             http_client=httpx.AsyncClient(trust_env=False))
        await client.responses.cancel(str(first.last_response_id))
        return refused, await Runner.run(agent, "Never mind", previous_response_id=first.last_response_id)

    refused, after = run(scenario)
    for error in refused:
        assert (error.code, error.param) == ("previous_response_waiting", "previous_response_id")
        assert "mcp_approval_response" in error.message and "/cancel" in error.message
    assert after.final_output == "Fine, I will not."
    assert app.effects(app.view(run_of(after.last_response_id))["session_id"], "email") == []


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
def test_usage_of_a_run_with_an_approval_is_counted_once(
    app: InProcessApp, model: ScriptedModelServer, streamed: bool
) -> None:
    """The SDK adds up the `usage` of every response of a `Runner.run`, as each of OpenAI's is its own: the turn
    after an approval answer reports its own model calls, not the run's total again, so the SDK's usage is the
    run's (it counted the first turn twice)."""
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    agent = sdk_agent(app, tools=[hosted_tool(on_approval_request=lambda _: {"approve": True})])

    async def scenario() -> Any:
        if streamed:
            return await finish(Runner.run_streamed(agent, "Email Bob"))
        return await Runner.run(agent, "Email Bob")

    result = run(scenario)
    counted = result.context_wrapper.usage
    assert result.final_output == "Sent." and counted.requests == 2
    total = app.view(run_of(result.last_response_id))["usage"]
    assert (counted.input_tokens, counted.output_tokens, counted.total_tokens) == (
        total["input_tokens"], total["output_tokens"], total["total_tokens"]
    )


@pytest.mark.slow
def test_an_interruption_answered_across_a_host_kill(
    tmp_path: Path, model: ScriptedModelServer, store_settings: dict[str, str]
) -> None:
    """The host is killed (SIGKILL) between the approval request (the SDK's interruption) and its answer; after the
    restart `state.approve` + `Runner.run(agent, state)` continues the same durable run and the email goes out
    once."""
    from test_e2e_crash import CrashableApp

    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    crashing = CrashableApp(tmp_path, model, store_settings)
    crashing.host.start()
    try:

        def agent() -> Agent[Any]:
            client = AsyncOpenAI(
                base_url=f"{crashing.host.base_url}/api/v1", api_key="unused",
                http_client=httpx.AsyncClient(timeout=300, trust_env=False), max_retries=0,
            )
            return Agent(name="helper", model=OpenAIResponsesModel(model="helper", openai_client=client),
                         tools=[hosted_tool()])

        first = asyncio.run(Runner.run(agent(), "Email Bob"))
        [interruption] = first.interruptions
        saved = first.to_state().to_json()  # what a client keeps while a person decides

        crashing.crash_and_restart()

        async def resume() -> Any:
            fresh = agent()
            state = await agents.RunState.from_json(fresh, saved)
            [pending] = state.get_interruptions()
            state.approve(pending)
            return await Runner.run(fresh, state)

        second = asyncio.run(resume())
        assert second.final_output == "Sent."
        run_id = run_of(second.last_response_id)
        assert run_id == run_of(first.last_response_id) and interruption.raw_item.name == "send_email"
        session_id = crashing.api.view(run_id)["session_id"]
        _, effects = crashing.stored(session_id)
        assert [(e.kind, e.payload) for e in effects] == [("email", EMAIL_BOB)]
    finally:
        crashing.host.close()
