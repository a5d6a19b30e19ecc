"""AgentFunctionApp end to end on devhost: entity signal + polling reads over the RPC API, and call_entity from an
orchestration, against a scripted OpenAI-compatible model on loopback (the real `openai` client streams from it).

Needs `agent-framework-azurefunctions==1.0.0b260922` and `agent-framework-openai` (skipped otherwise, except under
`make test-agent-framework`, which installs them in an environment of their own and sets REQUIRE_AGENT_FRAMEWORK=1
so that a broken install fails instead of skipping).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from devhost.testing import InProcessHost

for _module in ("agent_framework_azurefunctions", "agent_framework.openai"):
    if os.environ.get("REQUIRE_AGENT_FRAMEWORK"):
        importlib.import_module(_module)
    else:
        pytest.importorskip(_module)

APP = Path(__file__).resolve().parent.parent / "apps" / "agent_framework"


async def _chat_completions(request: web.Request) -> web.StreamResponse:
    """Streams `Echo #<user turns>: <last user message>` as chat.completion.chunk SSE events."""
    body = await request.json()
    users = [m for m in body["messages"] if m["role"] == "user"]
    content = users[-1]["content"]
    if isinstance(content, list):
        content = " ".join(part.get("text", "") for part in content)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": body["model"]}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": f"Echo #{len(users)}: {content}"},
                              "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}},
    ]
    for chunk in chunks:
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    return response


@pytest.fixture
def model_url() -> Iterator[str]:
    ready: list[str] = []
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def serve() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", _chat_completions)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        ready.append(f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1")  # type: ignore[union-attr]
        await stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=lambda: loop.run_until_complete(serve()), daemon=True)
    thread.start()
    while not ready and thread.is_alive():
        thread.join(0.01)
    yield ready[0]
    loop.call_soon_threadsafe(stop.set)
    thread.join(5)
    loop.close()


@pytest.mark.slow
def test_agent_runs_over_http_and_from_an_orchestration(model_url: str) -> None:
    env = {"OPENAI_BASE_URL": model_url, "OPENAI_API_KEY": "x", "OPENAI_MODEL": "fake-model"}
    with InProcessHost(APP, clock="real", env=env) as host:
        client = host.client
        assert client.get("/api/health").json()["agent_count"] == 1
        first = client.post("/api/agents/Joker/run", json={"message": "tell me a joke", "session_id": "s1"},
                            timeout=60)
        assert first.status_code == 200 and first.json()["response"] == "Echo #1: tell me a joke"
        second = client.post("/api/agents/Joker/run", json={"message": "and another", "session_id": "s1"}, timeout=60)
        assert second.json()["response"] == "Echo #2: and another" and second.json()["message_count"] == 4
        state = client.get("/runtime/webhooks/durabletask/entities/dafx-Joker/s1")
        assert state.status_code == 200 and state.json()["schemaVersion"] == "1.1.0"
        assert client.get("/runtime/webhooks/durabletask/entities/dafx-Joker/nope").status_code == 404
        instance_id = host.run(host.engine.start_new("joke_chain", None, None))
        status = host.wait_for_status(instance_id, timeout=60)
        assert status["runtimeStatus"] == "Completed"
        assert status["output"] == {"first": "Echo #1: first joke please", "second": "Echo #2: another one"}
