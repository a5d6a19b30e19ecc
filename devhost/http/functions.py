"""Serving the app's HTTP triggers under the route prefix."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from functools import lru_cache
from urllib.parse import urlsplit

from aiohttp import web

from devhost.execution import FunctionExecutor, FunctionFailedError, InProcessExecutor
from devhost.function_timeout import FunctionTimeoutError, bounded

from .client_binding import build_client_binding
from .conversion import HttpRequestData
from .header_bytes import PROXY_REFUSAL, proxy_refuses
from .keys import DEFAULT_AUTH_LEVEL, FunctionKeys, presented_key
from .routes import RouteTable
from .streaming import client_gone, streaming_failure
from .trigger import HttpTriggerSpec

log = logging.getLogger("devhost.http")


@lru_cache(maxsize=32)
def client_binding_json(
    origin: str, task_hub: str, connection: str | None, rpc_origin: str, code: str | None
) -> str:
    """The `durableClient` binding of an invocation: a function of these values only (the request's origin, the
    binding's task hub and connection, the host's RPC origin and webhook key), so each distinct one is built once.
    Bounded: the origin comes from the request's Host header."""
    return build_client_binding(origin, task_hub=task_hub, connection=connection, rpc_origin=rpc_origin,
                                code=code).to_json()


def public_route(route_prefix: str, spec: HttpTriggerSpec) -> str:
    """The path a trigger answers on: host.json's route prefix, then its route."""
    prefix = route_prefix.strip("/")
    return f"{'/' + prefix if prefix else ''}/{spec.route.strip('/')}"


class HttpFunctions:
    """Route table of HTTP triggers plus the invocation of the matched function."""

    def __init__(
        self,
        specs: Iterable[HttpTriggerSpec],
        *,
        route_prefix: str,
        hub_name: str,
        functions: FunctionExecutor,
        rpc_origin: Callable[[], str],
        live: InProcessExecutor | None = None,
        function_timeout: timedelta | None = None,
        keys: FunctionKeys | None = None,
        auth_levels: Mapping[str, str] | None = None,
    ) -> None:
        self.function_timeout = function_timeout
        # Function keys are checked only when devhost was given some (`func start` checks none).
        self.keys = keys
        self.auth_levels = dict(auth_levels or {})
        self.route_prefix = route_prefix.strip("/")
        self.hub_name = hub_name
        self.functions = functions
        self._rpc_origin = rpc_origin
        # Runs HTTP v2 functions on the client's connection in this process: all of them when functions run here,
        # the streaming ones when the others go to worker processes (a stream does not cross the process boundary).
        self.live = live if live is not None else (functions if isinstance(functions, InProcessExecutor) else None)
        self.specs = list(specs)
        self.table: RouteTable[HttpTriggerSpec] = RouteTable()
        for spec in self.specs:
            self.table.add(spec.template, spec.methods, spec)

    def strip_prefix(self, raw_path: str) -> str | None:
        """The path relative to the route prefix, or None when the path is outside it."""
        if not self.route_prefix:
            return raw_path
        head = f"/{self.route_prefix}"
        if raw_path.lower() == head.lower():
            return "/"
        if raw_path.lower().startswith(head.lower() + "/"):
            return raw_path[len(head) :]
        return None

    async def handle(self, request: web.Request, relative_path: str) -> web.StreamResponse:
        resolved = self.table.resolve(request.method, relative_path)
        if resolved is None:
            return web.Response(status=404)
        spec, route_values = resolved
        level = self.auth_levels.get(spec.function_name, DEFAULT_AUTH_LEVEL)
        if self.keys is not None and not self.keys.allows(level, spec.function_name, presented_key(request)):
            return web.Response(status=401)  # the host's UnauthorizedResult: no body
        body = await request.read()
        http_request = HttpRequestData.from_web_request(request, body, route_values)
        binding_json = None
        if spec.durable_client is not None:
            binding_json = client_binding_json(
                "{0.scheme}://{0.netloc}".format(urlsplit(http_request.url)),
                spec.durable_client.task_hub or self.hub_name,
                spec.durable_client.connection,
                self._rpc_origin(),
                self.keys.durable_webhook_key if self.keys is not None else None,
            )
        live = self.live if spec.http_v2 and (spec.streams or self.live is self.functions) else None
        refused = proxy_refuses(http_request.headers.items()) if spec.http_v2 else None
        try:
            if refused is not None:
                return await bounded(self._never_proxied(spec, request, refused), self.function_timeout,
                                     spec.function_name)
            if live is not None:
                streamed = await bounded(live.serve_http_v2(spec, http_request, binding_json, request),
                                         self.function_timeout, spec.function_name)
                log.info("Executed 'Functions.%s' (Succeeded, %s %s, streamed)", spec.function_name, request.method,
                         streamed.status)
                return streamed
            result = await bounded(self.functions.run_http(spec, http_request, binding_json), self.function_timeout,
                                   spec.function_name, self.functions)
        except FunctionTimeoutError as exc:
            # The host fails the invocation (its exception middleware answers 500) and restarts the worker.
            log.error("Executed 'Functions.%s' (Failed): %s", spec.function_name, exc)
            if live is not None and refused is None and request.transport is not None:
                request.transport.close()  # a stream may have started: cut it, as the host's restart does
            return web.Response(status=500)
        except FunctionFailedError as exc:
            # User code failed: like the Functions host, answer 500 with no body and keep serving (HTTP v2: the
            # worker's FastAPI route raised, so FastAPI's plain 500).
            log.error("Executed 'Functions.%s' (Failed): %s", spec.function_name, exc, exc_info=exc.__cause__)
            return streaming_failure(exc).to_web_response() if spec.http_v2 else web.Response(status=500)
        log.info("Executed 'Functions.%s' (Succeeded, %s %s)", spec.function_name, request.method, result.status)
        return result.to_web_response()

    @staticmethod
    async def _never_proxied(spec: HttpTriggerSpec, request: web.Request, header: str) -> web.StreamResponse:
        """An HTTP v2 request the host's proxy cannot send (devhost.http.header_bytes): the function never runs and
        the invocation waits, as on Azure, until `functionTimeout` (or the client leaves)."""
        log.error("Failed to proxy request to the worker for 'Functions.%s': %s (header %r holds a non-ASCII value); "
                  "as on Azure the function does not run and the request waits for functionTimeout",
                  spec.function_name, PROXY_REFUSAL, header)
        await client_gone(request)
        return web.Response(status=499)
