"""A fault-injecting HTTP proxy in front of the local Cosmos server (loopback only).

The app's Cosmos client talks to the proxy (`COSMOS_ENDPOINT=proxy.endpoint`); the proxy forwards every request to
the real (local) server, except that every `every`-th item operation (`/docs` paths) is answered by the proxy with
`status` the way Cosmos throttles or sheds load: 429 with `x-ms-retry-after-ms` and sub-status 3200, or 503. The
account document is rewritten so the SDK's endpoint discovery keeps routing through the proxy.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Literal

import aiohttp
from aiohttp import web
from pydantic import BaseModel, Field

_HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "content-encoding", "keep-alive"}


class CosmosFaultPlan(BaseModel):
    status: Literal[429, 503] = 429
    every: int = Field(default=3, ge=1)
    retry_after_ms: int = Field(default=5, ge=0)
    max_faults: int = Field(default=1_000, ge=0)


class CosmosFaultProxy:
    def __init__(self, upstream: str, plan: CosmosFaultPlan) -> None:
        self.upstream = upstream.rstrip("/")
        self.plan = plan
        self.item_requests = 0
        self.injected = 0
        self.forwarded = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="cosmos-fault-proxy", daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.endpoint = ""

    def start(self) -> CosmosFaultProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False), auto_decompress=False)
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.endpoint = f"http://127.0.0.1:{port}/"

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if "/docs" in request.path:
            self.item_requests += 1
            if self.item_requests % self.plan.every == 0 and self.injected < self.plan.max_faults:
                self.injected += 1
                await request.read()
                return self._fault()
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        body = await request.read()
        async with self._session.request(
            request.method, f"{self.upstream}{request.rel_url}", headers=headers, data=body
        ) as upstream:
            payload = await upstream.read()
            if request.path == "/" and request.method == "GET":  # the account document: keep discovery on the proxy
                payload = payload.replace(self.upstream.encode() + b"/", self.endpoint.encode())
                payload = payload.replace(self.upstream.encode(), self.endpoint.rstrip("/").encode())
            self.forwarded += 1
            out = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_HEADERS}
            return web.Response(status=upstream.status, body=payload, headers=out)

    def _fault(self) -> web.Response:
        if self.plan.status == 429:
            headers = {"x-ms-retry-after-ms": str(self.plan.retry_after_ms), "x-ms-substatus": "3200"}
            body = {"code": "TooManyRequests", "message": "Request rate is large (injected by the test proxy)."}
        else:
            headers = {}
            body = {"code": "ServiceUnavailable", "message": "Service is unavailable (injected by the test proxy)."}
        headers["x-ms-activity-id"] = "00000000-0000-0000-0000-000000000000"
        return web.json_response(body, status=self.plan.status, headers=headers, dumps=json.dumps)
