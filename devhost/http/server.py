"""The one aiohttp server of devhost: admin status, HTTP triggers, the Durable RPC API and the public webhooks."""

from __future__ import annotations

import logging
from typing import Protocol

from aiohttp import web

from .admin import ADMIN_PREFIX, AdminHandler
from .client_binding import RPC_PATH, WEBHOOK_PATH
from .functions import HttpFunctions

log = logging.getLogger("devhost.http")

LOOPBACK = "127.0.0.1"
# The Functions host accepts request bodies up to 100 MB (aiohttp's default is 1 MiB).
MAX_REQUEST_BODY = 100 * 1024 * 1024
# How long stop() lets in-flight requests (e.g. a function long-polling an entity) finish before cutting them off.
SHUTDOWN_GRACE_SECONDS = 5.0


class DurableRequestHandler(Protocol):
    async def handle(self, request: web.Request, path: str) -> web.StreamResponse: ...


def _relative(raw_path: str, base: str) -> str | None:
    """`raw_path` under `base` (case-insensitive, like the extension's routes), as "/rest", or None."""
    base = base.rstrip("/")
    lowered = raw_path.lower()
    if lowered == base.lower():
        return "/"
    if lowered.startswith(base.lower() + "/"):
        return raw_path[len(base) :]
    return None


class HttpHost:
    """Binds 127.0.0.1 only. `port=0` picks a free port (read `.port` after `start()`)."""

    def __init__(
        self,
        functions: HttpFunctions,
        durable: DurableRequestHandler | None,
        *,
        admin: AdminHandler | None = None,
        port: int = 0,
    ) -> None:
        self.functions = functions
        self.durable = durable
        self.admin = admin
        self.requested_port = port
        self.port: int | None = None
        self._runner: web.AppRunner | None = None

    @property
    def origin(self) -> str:
        if self.port is None:
            raise RuntimeError("the HTTP host is not started")
        return f"http://{LOOPBACK}:{self.port}"

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REQUEST_BODY)
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        return app

    async def start(self) -> None:
        self._runner = web.AppRunner(
            self.make_app(), access_log=None, handle_signals=False, shutdown_timeout=SHUTDOWN_GRACE_SECONDS
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, LOOPBACK, self.requested_port, reuse_address=True)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        raw_path = request.rel_url.raw_path
        if raw_path.rstrip("/").lower() == "/admin/host/status":
            if request.method != "GET":
                return web.Response(status=405)
            return web.json_response({"state": "Running"})
        if self.admin is not None and raw_path.lower().startswith(ADMIN_PREFIX):
            return await self.admin.handle(request, raw_path[len(ADMIN_PREFIX) :].strip("/").lower())
        for base in (RPC_PATH, WEBHOOK_PATH):
            relative = _relative(raw_path, base)
            if relative is not None:
                if self.durable is None:
                    return web.Response(status=404)
                return await self.durable.handle(request, relative)
        relative = self.functions.strip_prefix(raw_path)
        if relative is None:
            return web.Response(status=404)
        return await self.functions.handle(request, relative)
