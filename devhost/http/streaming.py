"""HTTP streams: the Python worker's "HTTP v2" mode (`azurefunctions-extensions-http-fastapi`), ported.

The contract of the real worker (azure-functions-python-worker `http_v2.py`, `bindings/meta.py`, `dispatcher.py`):
- the mode is on when a web extension package registered itself with `azurefunctions.extensions.base`
  (`HttpV2FeatureChecker.http_v2_enabled()`, i.e. `ModuleTrackerMeta.module_imported()`) and the app setting
  `PYTHON_ENABLE_INIT_INDEXING` is not false. It is per worker process, so it applies to EVERY HTTP function of the
  app, not only the streaming ones;
- at load, an annotated trigger parameter must be the extension's request type (`RequestTrackerMeta.check_type`)
  and an annotated return must be one of its response types (`ResponseTrackerMeta.check_type`); otherwise the
  function does not load. The annotations are read with `typing.get_type_hints` (`functions.Registry`), so a
  `__signature__` patched onto a wrapper does not change them;
- the host proxies the client's HTTP request to a web server inside the worker (uvicorn + FastAPI there); the
  function receives that live `fastapi.Request` with the route values synced into `path_params`; what it returns
  is what the FastAPI route returns (a `Response` as is, anything else through FastAPI's JSON encoding), so a
  `StreamingResponse` streams its chunks to the client as they are yielded; an exception is a 500.

devhost serves the same contract without a second server: it builds the ASGI scope of the client's request, hands
the function a real `fastapi.Request`, and runs the returned response as an ASGI app whose `send` writes straight
to the client's connection. A client disconnect is reported through `receive` as `http.disconnect`, so Starlette
cancels the generator, as uvicorn makes it do on Azure.

One difference, on purpose: devhost loads several apps in one test process while the extension's registry is
process-global, so "this app uses the extension" is decided per app (the app's module imported something from
the extension, or a function is annotated with its request type), not from the process-global registry alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import sys
import typing
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from .conversion import HttpRequestData, HttpResponseData

BASE_MODULE = "azurefunctions.extensions.base"
INIT_INDEXING_SETTING = "PYTHON_ENABLE_INIT_INDEXING"
# How often an open stream checks whether its client went away (aiohttp has no public connection-lost callback).
DISCONNECT_POLL_SECONDS = 0.1

Message = MutableMapping[str, Any]


class HttpV2LoadError(Exception):
    """A function's annotations do not fit the extension's types (the worker refuses to load it)."""


def _ext_base() -> Any | None:
    return sys.modules.get(BASE_MODULE)


def _loaded_ext_base() -> Any:
    """The extension's base module, for code that runs only in HTTP v2 mode (so with the extension loaded)."""
    base = _ext_base()
    if base is None:
        raise HttpV2LoadError(f"HTTP v2 mode needs the web extension ({BASE_MODULE}) imported by the app")
    return base


def _setting_false(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"false", "0"}


def extension_module() -> str | None:
    """The web extension package registered in this process (e.g. `azurefunctions.extensions.http.fastapi.web`)."""
    base = _ext_base()
    if base is None or not base.ModuleTrackerMeta.module_imported():
        return None
    return str(base.ModuleTrackerMeta.get_module())


def app_uses_extension(app_module: Any | None, functions: list[Callable[..., Any]], *,
                        honour_setting: bool = True) -> bool:
    """HTTP v2 mode for one app: the extension is registered, the setting allows it (unless `honour_setting` is
    False: the worker's annotation checks ignore it), and this app refers to it."""
    registered = extension_module()
    if registered is None or (honour_setting and _setting_false(INIT_INDEXING_SETTING)):
        return False
    package = registered.rsplit(".", 1)[0]
    exported = {id(v) for v in vars(sys.modules.get(package, object())).values() if inspect.isclass(v)}
    if app_module is not None:
        for value in vars(app_module).values():
            if id(value) in exported or (inspect.ismodule(value) and value.__name__.startswith(package)):
                return True
    base = _ext_base()
    return any(base.RequestTrackerMeta.check_type(ann) for fn in functions for ann in _annotations(fn)[0].values())


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    for eval_str in (True, False):
        try:
            return inspect.signature(fn, eval_str=eval_str)
        except (NameError, TypeError, ValueError):
            continue
    return None


def _annotations(fn: Callable[..., Any]) -> tuple[dict[str, Any], Any]:
    signature = _signature(fn)
    if signature is None:
        return {}, inspect.Signature.empty
    params = {n: p.annotation for n, p in signature.parameters.items() if p.annotation is not inspect.Parameter.empty}
    return params, signature.return_annotation


def _worker_annotations(name: str, fn: Callable[..., Any]) -> tuple[dict[str, Any], Any]:
    """The annotations as the worker reads them: `typing.get_type_hints`, i.e. the function's `__annotations__`
    resolved in its globals (a `__signature__` set on a wrapper does not count); unresolvable ones fail the load."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:
        raise HttpV2LoadError(
            f"function '{name}': its annotations do not resolve ({type(exc).__name__}: {exc})") from exc
    returns = hints.pop("return", inspect.Signature.empty)
    return hints, returns


def check_function(name: str, fn: Callable[..., Any], request_param: str) -> bool:
    """Validate a function's annotations like the worker in HTTP v2 mode; True when its response is a stream."""
    base = _loaded_ext_base()
    params, returns = _worker_annotations(name, fn)
    annotation = params.get(request_param)
    if annotation is not None and not base.RequestTrackerMeta.check_type(annotation):
        raise HttpV2LoadError(
            f"function '{name}': the type of {request_param!r} ({getattr(annotation, '__name__', annotation)}) "
            f"does not match the HTTP trigger: with {extension_module()} loaded it must be "
            f"{base.RequestTrackerMeta.get_request_type().__module__}.Request")
    if returns is inspect.Signature.empty or returns is None or returns is type(None):
        return False
    if not base.ResponseTrackerMeta.check_type(returns):
        raise HttpV2LoadError(
            f"function '{name}': its return annotation ({getattr(returns, '__name__', returns)}) is not a response "
            f"type of {extension_module()}")
    streaming = base.ResponseTrackerMeta.get_response_type(base.ResponseLabels.STREAMING)
    files = base.ResponseTrackerMeta.get_response_type(base.ResponseLabels.FILE)
    return inspect.isclass(returns) and any(t is not None and issubclass(returns, t) for t in (streaming, files))


# ----------------------------------------------------------------------------------------------- requests

# The Functions host forwards an HTTP v2 request to the worker's web server with YARP's default transforms
# (azure-functions-host `DefaultHttpProxyService`, `ScriptInvocationRequestTransformer` -> `HttpTransformer.Default`,
# action `Set`): the worker sees where the request came in (X-Forwarded-For/-Proto/-Host) as the host saw it, the
# client's own values of these headers replaced, and no X-Forwarded-Prefix (the host has no path base).
FORWARDED_HEADERS = ("x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-prefix")
# What the proxy never copies: YARP 2.0's skipped request headers (`RequestUtilities._headersToExclude`: hop-by-hop
# and proxy headers; its client writes its own connection headers), and the X-Forwarded-* headers it sets itself.
NOT_PROXIED = frozenset({
    "connection", "transfer-encoding", "keep-alive", "upgrade", "proxy-connection", "proxy-authenticate",
    "proxy-authentication-info", "proxy-authorization", "proxy-features", "proxy-instruction", "security-scheme",
    "alpn", "close", "http2-settings", "upgrade-insecure-requests", "te", "alt-svc", *FORWARDED_HEADERS,
})


def proxied_headers(headers: Iterable[tuple[str, str]], url: str, client_ip: str | None) -> list[tuple[str, str]]:
    """`headers` of the request the host received at `url` from `client_ip`, as its proxy hands them to the worker."""
    parts = urlsplit(url)
    kept = [(name, value) for name, value in headers if name.lower() not in NOT_PROXIED]
    own = [("x-forwarded-for", client_ip)] if client_ip else []
    return [*kept, *own, ("x-forwarded-proto", parts.scheme), ("x-forwarded-host", parts.netloc)]



def asgi_scope(data: HttpRequestData, route_values: dict[str, str], client: tuple[str, int] | None) -> Message:
    """The scope uvicorn would give FastAPI for this request (spec 2.3: disconnects arrive through `receive`)."""
    parts = urlsplit(data.url)
    pairs = proxied_headers(data.headers.items(), data.url, client[0] if client else None)
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in pairs]
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": data.method.upper(),
        "scheme": parts.scheme or "http",
        "path": _unquote_path(parts.path),
        "raw_path": parts.path.encode("latin-1"),
        "query_string": parts.query.encode("latin-1"),
        "root_path": "",
        "headers": headers,
        "server": (parts.hostname or "127.0.0.1", port),
        "client": client,
        "path_params": dict(route_values),
    }


def _unquote_path(path: str) -> str:
    from urllib.parse import unquote

    return unquote(path)


def make_request(scope: Message, receive: Callable[[], Awaitable[Message]]) -> Any:
    """The extension's request type (a `fastapi.Request`), route values synced with its own synchronizer."""
    base = _loaded_ext_base()
    request = base.RequestTrackerMeta.get_request_type()(scope, receive)
    base.RequestTrackerMeta.get_synchronizer().sync_route_params(request, dict(scope["path_params"]))
    return request


def buffered_receive(body: bytes) -> Callable[[], Awaitable[Message]]:
    """`receive` for a request whose body is already read (worker processes: the body travels in the frame)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # never disconnects: the response is rendered to a buffer
        raise AssertionError("unreachable")

    return receive


def live_receive(body: bytes, request: web.Request,
                 left: asyncio.Event | None = None) -> Callable[[], Awaitable[Message]]:
    """`receive` over a live client connection: the body, then `http.disconnect` once the client has gone (or, at
    once, when `left` is set: a write found it gone)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await client_gone(request, left)
        return {"type": "http.disconnect"}

    return receive


async def client_gone(request: web.Request, left: asyncio.Event | None = None) -> None:
    """Return once the client of `request` has closed its connection (aiohttp tells a handler only when it writes),
    or `left` is set."""
    left = left or asyncio.Event()
    while not _gone(request) and not left.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(left.wait(), DISCONNECT_POLL_SECONDS)


def _gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


# ----------------------------------------------------------------------------------------------- responses


def as_response(result: Any) -> Any:
    """What FastAPI's catch-all route makes of the function's return value."""
    from fastapi.encoders import jsonable_encoder
    from fastapi.responses import JSONResponse
    from starlette.responses import Response

    if isinstance(result, Response):
        return result
    return JSONResponse(content=jsonable_encoder(result))


async def render_buffered(response: Any, scope: Message) -> HttpResponseData:
    """Run the response to completion into one `HttpResponseData` (non-streaming functions in worker processes)."""
    status = 500
    headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []

    async def send(message: Message) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = int(message["status"])
            headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", [])]
        elif message["type"] == "http.response.body":
            chunks.append(bytes(message.get("body", b"")))

    await response(scope, buffered_receive(b""), send)
    return HttpResponseData(status=status, headers=headers, body=b"".join(chunks))


async def send_live(response: Any, scope: Message, request: web.Request, body: bytes) -> web.StreamResponse:
    """Run the response as an ASGI app writing to the client as it goes; returns the prepared aiohttp response.

    As uvicorn (the worker's server): once the client has gone, `send` drops what it is given instead of raising,
    and the disconnect reaches the app through `receive` (Starlette then cancels the stream where it waits). A write
    that raised stopped the response with the generator suspended at its `yield`, its `finally` left to the garbage
    collector: a devhost-only way for a stream to outlive its client."""
    out: web.StreamResponse | None = None
    left = asyncio.Event()  # the client is gone, found by a write: `receive` reports it now, not at its next poll

    async def send(message: Message) -> None:
        if left.is_set() or _gone(request):
            left.set()
            return
        try:
            await _write(message)
        except ConnectionError:  # aiohttp's "Cannot write to closing transport": the client left mid-write
            left.set()

    async def _write(message: Message) -> None:
        nonlocal out
        if message["type"] == "http.response.start":
            out = web.StreamResponse(status=int(message["status"]))
            for key, value in message.get("headers", []):
                out.headers.add(key.decode("latin-1"), value.decode("latin-1"))
            # Chunks go out as they come: no compression buffering, no proxy buffering.
            out.headers.setdefault("X-Accel-Buffering", "no")
            await out.prepare(request)
        elif message["type"] == "http.response.body":
            if out is None:
                raise RuntimeError("the ASGI app sent http.response.body before http.response.start")
            chunk = bytes(message.get("body", b""))
            if chunk:
                await out.write(chunk)
            if not message.get("more_body", False):
                await out.write_eof()

    with contextlib.suppress(ConnectionError, OSError):  # the socket failed under a write of aiohttp's own
        await response(scope, live_receive(body, request, left), send)
    if out is None:  # the response sent nothing (a client that left before the start)
        return web.Response(status=499)
    return out


def streaming_failure(exc: BaseException) -> HttpResponseData:
    """FastAPI's answer to an exception raised in the route: 500, text."""
    return HttpResponseData(status=500, headers=[("Content-Type", "text/plain; charset=utf-8")],
                            body=b"Internal Server Error")


__all__ = [
    "HttpV2LoadError",
    "app_uses_extension",
    "as_response",
    "asgi_scope",
    "check_function",
    "client_gone",
    "make_request",
    "proxied_headers",
    "render_buffered",
    "send_live",
    "streaming_failure",
]
