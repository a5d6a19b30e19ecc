"""Fixtures shared by the core tests: one scripted model server per session (reset before each test) and an
`OpenAIChatClient` bound to it through the real openai SDK.

    async def test_x(scripted_model, model_client):
        scripted_model.set_script(Script.of(Reply.call("get_weather", {"city": "Paris"}), "Sunny."))
        response = await model_client.get_response(ChatRequest(messages=[Message.user("weather?")]))
        assert scripted_model.log.last.roles == ["user"]
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from agent_runtime.models import OpenAIChatClient
from scripted_model import ScriptedModelServer

SCRIPTED_MODEL_NAME = "scripted-model"


@pytest.fixture(scope="session")
def scripted_model_server() -> Iterator[ScriptedModelServer]:
    """The session's server (a background thread on a free 127.0.0.1 port); use `scripted_model` in tests."""
    server = ScriptedModelServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def scripted_model(scripted_model_server: ScriptedModelServer) -> Iterator[ScriptedModelServer]:
    """The shared server with a clean slate: no script (every call answers 500 until `set_script`), no pending
    faults, an empty request log, no latency."""
    scripted_model_server.reset()
    scripted_model_server.latency_ms = 0
    yield scripted_model_server
    scripted_model_server.reset()


@pytest.fixture
async def model_client(scripted_model: ScriptedModelServer) -> AsyncIterator[OpenAIChatClient]:
    """The real openai-SDK client (SDK retries off) pointed at `scripted_model`."""
    client = OpenAIChatClient.compatible(base_url=scripted_model.base_url, model=SCRIPTED_MODEL_NAME, timeout=10)
    try:
        yield client
    finally:
        await client.aclose()
