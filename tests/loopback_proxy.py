"""An HTTP proxy on 127.0.0.1 (a free port) in front of one upstream server, on an event loop of its own thread, for
tests that put something between a client and a server: a subclass decides per request (`handle`), and `forward`
passes a request through, its answer streamed back as it comes (an SSE stream keeps flowing)."""

from __future__ import annotations

import asyncio
import threading
from typing import Self

import aiohttp
from aiohttp import web

HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "content-encoding", "keep-alive"}


class LoopbackProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.endpoint = ""  # the proxy's base URL (with a trailing slash), once started
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=type(self).__name__, daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    def start(self) -> Self:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        return await self.forward(request)

    async def forward(self, request: web.Request) -> web.StreamResponse:
        async with self.upstream_response(request, await request.read()) as upstream:
            return await self.stream_back(request, upstream)

    def upstream_response(self, request: web.Request, body: bytes) -> aiohttp.client._RequestContextManager:
        """The request, sent on to the upstream server (with `body`)."""
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        return self._session.request(
            request.method, f"{self.upstream}{request.rel_url}", headers=headers, data=body, allow_redirects=False
        )

    @staticmethod
    async def stream_back(request: web.Request, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
        headers = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP_HEADERS}
        response = web.StreamResponse(status=upstream.status, headers=headers)
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=False), auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None),  # a stream lasts as long as its run
        )
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
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
