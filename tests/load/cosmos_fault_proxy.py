"""A fault-injecting HTTP proxy in front of the local Cosmos server (loopback only).

The app's Cosmos client talks to the proxy (`COSMOS_ENDPOINT=proxy.endpoint`); the proxy forwards every request to
the real (local) server, except that every `every`-th item operation (`/docs` paths) is answered by the proxy with
`status` the way Cosmos throttles or sheds load: 429 with `x-ms-retry-after-ms` and sub-status 3200, or 503. The
account document is rewritten so the SDK's endpoint discovery keeps routing through the proxy.

The SDK retries a faulted operation itself, with the same `x-ms-activity-id`; the proxy lets such retries through and
does not count them. So which operations fail depends on how concurrent requests interleave, but what reaches the
app does not: no fault gets past the SDK, except on the first operation on each path fragment of `surface_once`
(e.g. `/colls/effects/docs`), which fails on every attempt, so exactly one error per fragment reaches the app.
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
    # Path fragments whose first operation fails on all its attempts: the error reaches the app (once per fragment).
    surface_once: tuple[str, ...] = ()


class CosmosFaultProxy:
    def __init__(self, upstream: str, plan: CosmosFaultPlan) -> None:
        self.upstream = upstream.rstrip("/")
        self.plan = plan
        self.item_requests = 0
        self.injected = 0
        self.surfaced: list[str] = []  # the `surface_once` fragments whose first operation failed for good
        self._faulted: dict[str, bool] = {}  # activity id of a faulted operation -> whether its retries fail too
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
        if "/docs" in request.path and self._should_fault(request.path, request.headers.get("x-ms-activity-id", "")):
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

    def _should_fault(self, path: str, activity_id: str) -> bool:
        if activity_id and activity_id in self._faulted:  # the SDK retrying an operation this proxy faulted
            return self._faulted[activity_id]
        fragment = next((f for f in self.plan.surface_once if f in path and f not in self.surfaced), None)
        if fragment is not None and activity_id:
            self.surfaced.append(fragment)
            self._faulted[activity_id] = True
            return True
        self.item_requests += 1
        if self.item_requests % self.plan.every != 0 or self.injected >= self.plan.max_faults:
            return False
        if activity_id:
            self._faulted[activity_id] = False
        return True

    def _fault(self) -> web.Response:
        if self.plan.status == 429:
            headers = {"x-ms-retry-after-ms": str(self.plan.retry_after_ms), "x-ms-substatus": "3200"}
            body = {"code": "TooManyRequests", "message": "Request rate is large (injected by the test proxy)."}
        else:
            headers = {}
            body = {"code": "ServiceUnavailable", "message": "Service is unavailable (injected by the test proxy)."}
        headers["x-ms-activity-id"] = "00000000-0000-0000-0000-000000000000"
        return web.json_response(body, status=self.plan.status, headers=headers, dumps=json.dumps)
