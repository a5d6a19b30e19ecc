"""call_http through the built-in HTTP activity: plain request and the 202 + Location polling loop on timers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from engine_helpers import OpenEngine, output, raw_history

from devhost.engine.api import RuntimeStatus
from devhost.protocol.events import EventType


@pytest.fixture
async def target() -> AsyncIterator[tuple[str, list[str]]]:
    """`POST /start` answers 202 + Location + Retry-After: 5 twice, then `GET /status` answers 200."""
    seen: list[str] = []
    polls = {"n": 0}

    async def start(request: web.Request) -> web.Response:
        seen.append(f"POST {await request.text()}")
        return web.Response(status=202, headers={"Location": f"{base}/status", "Retry-After": "5"})

    async def status(request: web.Request) -> web.Response:
        polls["n"] += 1
        seen.append("GET")
        if polls["n"] < 2:
            return web.Response(status=202, headers={"Location": f"{base}/status"})
        return web.Response(status=200, text="finished")

    app = web.Application()
    app.router.add_post("/start", start)
    app.router.add_get("/status", status)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    yield base, seen
    await runner.cleanup()


async def test_call_http_returns_the_202_to_the_orchestrator_which_polls(open_engine: OpenEngine, target) -> None:
    base, seen = target
    engine = await open_engine("call_http")
    iid = await engine.start_new("fetch", None, json.dumps(json.dumps(f"{base}/start")))
    await engine.run_until_idle(skip_timers=True)
    status = await engine.get_status(iid)
    assert status is not None and status.runtime_status == RuntimeStatus.Completed
    assert output(status) == {"status": 200, "content": "finished"}
    assert seen == ['POST {"q": 1}', "GET", "GET"]
    history = raw_history(engine, iid)
    scheduled = [e["Name"] for e in history if e["EventType"] == EventType.TaskScheduled]
    assert scheduled == ["BuiltIn::HttpActivity"] * 3
    assert sum(e["EventType"] == EventType.TimerCreated for e in history) == 2  # the orchestrator's poll timers


async def test_call_http_connection_failure_fails_the_task(open_engine: OpenEngine) -> None:
    engine = await open_engine("call_http")
    iid = await engine.start_new("fetch", None, json.dumps(json.dumps("http://127.0.0.1:9/nothing")))
    await engine.run_until_idle()
    status = await engine.get_status(iid)
    assert status is not None and status.runtime_status == RuntimeStatus.Failed
    assert "Activity function 'BuiltIn::HttpActivity' failed:" in str(output(status))
