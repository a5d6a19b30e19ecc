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

import json
from typing import Literal

from aiohttp import web
from loopback_proxy import HOP_HEADERS, LoopbackProxy
from pydantic import BaseModel, Field


class CosmosFaultPlan(BaseModel):
    status: Literal[429, 503] = 429
    every: int = Field(default=3, ge=1)
    retry_after_ms: int = Field(default=5, ge=0)
    max_faults: int = Field(default=1_000, ge=0)
    # Path fragments whose first operation fails on all its attempts: the error reaches the app (once per fragment).
    surface_once: tuple[str, ...] = ()


class CosmosFaultProxy(LoopbackProxy):
    def __init__(self, upstream: str, plan: CosmosFaultPlan) -> None:
        super().__init__(upstream)
        self.plan = plan
        self.item_requests = 0
        self.injected = 0
        self.surfaced: list[str] = []  # the `surface_once` fragments whose first operation failed for good
        self._faulted: dict[str, bool] = {}  # activity id of a faulted operation -> whether its retries fail too
        self.forwarded = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if "/docs" in request.path and self._should_fault(request.path, request.headers.get("x-ms-activity-id", "")):
            self.injected += 1
            await request.read()
            return self._fault()
        async with self.upstream_response(request, await request.read()) as upstream:
            payload = await upstream.read()
            if request.path == "/" and request.method == "GET":  # the account document: keep discovery on the proxy
                payload = payload.replace(self.upstream.encode() + b"/", self.endpoint.encode())
                payload = payload.replace(self.upstream.encode(), self.endpoint.rstrip("/").encode())
            self.forwarded += 1
            out = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP_HEADERS}
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
