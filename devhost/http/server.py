"""The one aiohttp server of devhost: admin status, HTTP triggers, the Durable RPC API and the public webhooks."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler

from .admin import ADMIN_PREFIX, AdminHandler
from .client_binding import RPC_PATH, WEBHOOK_PATH
from .functions import HttpFunctions
from .header_bytes import kestrel_refuses
from .keys import presented_key
from .request_limits import PARSER_LIMITS, kestrel_refusal, parser_refusal_status, refusal_status

log = logging.getLogger("devhost.http")

LOOPBACK = "127.0.0.1"
# The Functions host accepts request bodies up to 100 MB (aiohttp's default is 1 MiB).
MAX_REQUEST_BODY = 100 * 1024 * 1024
# How long stop() lets in-flight requests (e.g. a function long-polling an entity) finish before cutting them off.
SHUTDOWN_GRACE_SECONDS = 5.0


class _QuietRequestHandler(RequestHandler):
    """A request aiohttp's parser cannot read (over Kestrel's head limits, or malformed) gets Kestrel's bare answer
    (`request_limits`): aiohttp's own 400 quoted the start of the offending value, and logged it with that text: for
    `Authorization` that is the start of a credential. The log says what was wrong, never what was sent."""

    def handle_error(
        self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status != 400 or not isinstance(exc, HttpProcessingError):
            return super().handle_error(request, status, exc, message)
        refused = parser_refusal_status(exc)
        log.info("refused an unreadable request from %s (%s: %d)", request.remote, type(exc).__name__, refused)
        return kestrel_refusal(refused)


class _QuietServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _QuietRequestHandler(self, loop=self._loop, **self._kwargs)


class _QuietAppRunner(web.AppRunner):
    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _QuietServer  # the same server, making the request handlers above
        return server


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
        status: Mapping[str, Any] | None = None,
    ) -> None:
        self.functions = functions
        self.keys = functions.keys  # when devhost checks keys, the Durable webhooks need the extension's
        self.status = {"state": "Running", **(status or {})}
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
        # Every path reaches `dispatch`, which routes as the Functions host does: `(?s:...)` because a decoded path may
        # hold a newline (%0A), which the host routes like any other character and `.` alone would not match.
        app.router.add_route("*", "/{tail:(?s:.*)}", self.dispatch)
        return app

    async def start(self) -> None:
        self._runner = _QuietAppRunner(
            self.make_app(), access_log=None, handle_signals=False, shutdown_timeout=SHUTDOWN_GRACE_SECONDS,
            **PARSER_LIMITS,  # the request handlers' parser limits
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
        # Kestrel refuses these before any routing, whatever the path.
        too_large = refusal_status(request.method, request.raw_path, request.raw_headers)
        if too_large is not None:
            log.info("refused a request from %s: its head is over Kestrel's limits (%d)", request.remote, too_large)
            return kestrel_refusal(too_large)
        if kestrel_refuses(request.raw_headers):
            log.info("refused a request from %s: a header value is not UTF-8", request.remote)
            return kestrel_refusal()
        raw_path = request.rel_url.raw_path
        if raw_path.rstrip("/").lower() == "/admin/host/status":
            if request.method != "GET":
                return web.Response(status=405)
            return web.json_response(self.status)
        if self.admin is not None and raw_path.lower().startswith(ADMIN_PREFIX):
            return await self.admin.handle(request, raw_path[len(ADMIN_PREFIX) :].strip("/").lower())
        for base in (RPC_PATH, WEBHOOK_PATH):
            relative = _relative(raw_path, base)
            if relative is not None:
                if self.durable is None:
                    return web.Response(status=404)
                if base == WEBHOOK_PATH and self.keys is not None and \
                        not self.keys.allows_durable_webhook(presented_key(request)):
                    return web.Response(status=401)
                return await self.durable.handle(request, relative)
        relative = self.functions.strip_prefix(raw_path)
        if relative is None:
            return web.Response(status=404)
        return await self.functions.handle(request, relative)
