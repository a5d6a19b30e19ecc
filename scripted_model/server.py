"""The scripted OpenAI-compatible HTTP server (aiohttp).

Routes (the same handler under every prefix an OpenAI-family client may use):
- `POST /v1/chat/completions`, `POST /chat/completions`, `POST /openai/deployments/{deployment}/chat/completions`
  (Azure OpenAI's path; `api-version` is accepted and ignored): plain JSON or SSE when `stream` is true;
- `GET /v1/models`, `GET /models`; `GET /health`.

Run it in-process on a free 127.0.0.1 port, either in a background thread (`start()`/`stop()`, or `with`), or on
the caller's running loop (`await start_async()` / `await stop_async()`); or as `python -m scripted_model`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import socket
import threading
import time
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from .conversation import ChatCompletionRequest
from .engine import Responder, ScriptEngine, ScriptExhausted
from .request_log import RequestLog
from .script import Fault, Script
from .wire import Answer, completion_body, error_body, estimate_usage, next_id, scripted_usage, stream_chunks

log = logging.getLogger(__name__)

DEFAULT_MODELS = ("scripted-model",)
_STARTUP_TIMEOUT_S = 10.0
_SHUTDOWN_GRACE_S = 0.25
_TRUNCATED_JSON = '{"id": "chatcmpl-broken", "choices": ['


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():  # a held call whose client went away was cancelled
        waiter.set_result(None)


def _sse(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


class ScriptedModelServer:
    """An OpenAI-compatible chat-completions server that answers from a script, a rule set or a brain.

    `responder` is a `Script`, any object with `respond(conversation) -> Reply | None` (e.g. `DemoBrain()`), or None
    (every request then answers 500 until `set_script` is called). `latency_ms` delays every answer (per-reply
    `latency_ms` overrides it); `chunk_delay_ms` spaces out stream chunks, so a streaming UI shows text arriving.
    """

    def __init__(
        self,
        responder: Responder | Script | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency_ms: float = 0.0,
        chunk_delay_ms: float = 0.0,
        models: tuple[str, ...] = DEFAULT_MODELS,
        max_log_entries: int = 1_000,
    ) -> None:
        self.engine = ScriptEngine(responder, latency_ms=latency_ms)
        self.log = RequestLog(max_log_entries)
        self.models = models
        self.chunk_delay_ms = chunk_delay_ms
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None
        self._hold_lock = threading.Lock()
        self._holding = False
        self._held: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None], bool]] = []  # (.., mid-stream)
        self._pause_after: int | None = None
        # (time.monotonic(), chunk) of every streamed chunk as it is handed to the socket, when `chunk_times` is a list
        self.chunk_times: list[tuple[float, dict[str, Any]]] | None = None
        self.report_usage = True
        """False: answers carry no usage, even when a stream asks for it (as some OpenAI-compatible servers do)."""

    # ------------------------------------------------------------------ control (any thread)

    def hold_answers(self) -> None:
        """Keep every answer (after its latency) until `release_answers()`: a test can then act while a call is
        certainly in flight, instead of racing a latency. The request is logged as soon as it arrives."""
        with self._hold_lock:
            self._holding = True

    def hold_mid_stream(self, after_chunks: int) -> None:
        """Streamed answers stop after `after_chunks` chunks until `release_answers()`: a test can act while an answer
        is certainly half-written."""
        with self._hold_lock:
            self._pause_after = after_chunks

    def release_answers(self, *, keep_mid_stream: bool = False) -> None:
        """Send the held answers and stop holding new ones. `keep_mid_stream`: only the answers held whole
        (`hold_answers`), which then stop half-written as `hold_mid_stream` says, as streams already stopped stay: a
        test can have every call in flight before any answer is sent, then some answers sent and some half-written."""
        with self._hold_lock:
            held = [entry for entry in self._held if not (keep_mid_stream and entry[2])]
            self._held = [entry for entry in self._held if keep_mid_stream and entry[2]]
            self._holding = False
            if not keep_mid_stream:
                self._pause_after = None
        for loop, waiter, _ in held:
            loop.call_soon_threadsafe(_resolve, waiter)

    def set_script(self, responder: Responder | Script | None) -> None:
        self.engine.set_responder(responder)

    def fail_next(self, fault: Fault, times: int = 1) -> None:
        self.engine.fail_next(fault, times)

    def reset(self, responder: Responder | Script | None = None) -> None:
        """New responder, no pending faults, nothing held, empty log: a clean slate between tests sharing one server."""
        self.engine.set_responder(responder)
        self.release_answers()
        self.log.clear()
        self.report_usage = True

    @property
    def latency_ms(self) -> float:
        return self.engine.latency_ms

    @latency_ms.setter
    def latency_ms(self, value: float) -> None:
        self.engine.latency_ms = value

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the scripted model server is not running")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What to pass as the openai client's `base_url`."""
        return f"{self.url}/v1"

    # ------------------------------------------------------------------ lifecycle

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        for prefix in ("/v1", "", "/openai/deployments/{deployment}"):
            app.router.add_post(f"{prefix}/chat/completions", self._chat_completions)
        for prefix in ("/v1", ""):
            app.router.add_get(f"{prefix}/models", self._models)
        app.router.add_get("/health", self._health)
        return app

    async def start_async(self) -> ScriptedModelServer:
        """Serve on the running event loop."""
        if self._runner is not None:
            raise RuntimeError("the scripted model server is already running")
        # handler_cancellation: a client that gives up (timeout) cancels its pending answer instead of leaving it
        # sleeping out its latency. shutdown_timeout: in-flight answers must not hold up stop() for long.
        runner = web.AppRunner(
            self.make_app(),
            access_log=None,
            handle_signals=False,
            handler_cancellation=True,
            shutdown_timeout=_SHUTDOWN_GRACE_S,
        )
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._host, self._requested_port))
            site = web.SockSite(runner, sock, backlog=4096)
            await site.start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = sock.getsockname()[1]
        return self

    async def stop_async(self) -> None:
        runner, self._runner = self._runner, None
        self._port = None
        if runner is not None:
            await runner.cleanup()

    def start(self) -> ScriptedModelServer:
        """Serve from a daemon thread with its own event loop; returns once the port accepts connections."""
        if self._thread is not None:
            raise RuntimeError("the scripted model server is already running")
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="scripted-model", daemon=True)
        thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.start_async(), loop).result(_STARTUP_TIMEOUT_S)
        except BaseException:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(_STARTUP_TIMEOUT_S)
            loop.close()
            raise
        self._thread, self._thread_loop = thread, loop
        return self

    def stop(self) -> None:
        thread, loop = self._thread, self._thread_loop
        if thread is None or loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._stop_and_drain(), loop).result(_STARTUP_TIMEOUT_S)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(_STARTUP_TIMEOUT_S)
            loop.close()
            self._thread = self._thread_loop = None

    async def _stop_and_drain(self) -> None:
        await self.stop_async()
        current = asyncio.current_task()
        leftovers = [task for task in asyncio.all_tasks() if task is not current]
        for task in leftovers:
            task.cancel()
        await asyncio.gather(*leftovers, return_exceptions=True)

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> ScriptedModelServer:
        return await self.start_async()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop_async()

    # ------------------------------------------------------------------ handlers

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "requests": self.log.total})

    async def _models(self, request: web.Request) -> web.Response:
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in self.models]
        return web.json_response({"object": "list", "data": data})

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        record: dict[str, Any] = {
            "method": request.method,
            "path": request.path,
            "query": dict(request.query),
            "headers": {k.lower(): v for k, v in request.headers.items()},
        }
        raw = await request.read()
        try:
            body = json.loads(raw)
            record["body"] = body if isinstance(body, dict) else None
            parsed = ChatCompletionRequest.model_validate(body)
        except (ValueError, ValidationError) as exc:
            self.log.record(**record, status=400, outcome="invalid_request")
            message = f"invalid chat completions request: {_first_error(exc)}"
            return web.json_response(error_body(message, type_="invalid_request_error"), status=400)
        record["stream"] = bool(parsed.stream)
        try:
            decision = self.engine.decide(parsed)
        except ScriptExhausted as exc:
            self.log.record(**record, status=500, outcome="script_exhausted")
            body = error_body(str(exc), type_="script_exhausted", code="script_exhausted")
            return web.json_response(body, status=500)
        except Exception as exc:  # a bug in a custom responder: answer like a failing model, keep serving
            log.exception("scripted model responder failed")
            self.log.record(**record, status=500, outcome="responder_error")
            message = f"the scripted model's responder failed: {type(exc).__name__}: {exc}"
            return web.json_response(error_body(message, type_="server_error", code="responder_error"), status=500)
        # Recorded before the latency, so a test can see a call is in flight while the "model" is still thinking.
        status = decision.fault.status if decision.fault else 200
        self.log.record(**record, status=status, outcome="fault" if decision.fault else "reply", reply=decision.reply)
        if decision.latency_s > 0:
            await asyncio.sleep(decision.latency_s)  # the configured model latency, not a wait for something
        await self._until_released()
        if decision.fault is not None:
            return await self._serve_fault(request, decision.fault, parsed)
        if decision.answer is None:  # pragma: no cover - `ScriptEngine.decide` answers whenever it does not fault
            raise RuntimeError("the scripted model decided neither a fault nor an answer")
        return await self._serve_answer(request, decision.answer, parsed)

    async def _until_released(self, mid_stream: bool = False) -> None:
        with self._hold_lock:
            if not (self._pause_after is not None if mid_stream else self._holding):
                return
            waiter = asyncio.get_running_loop().create_future()
            self._held.append((asyncio.get_running_loop(), waiter, mid_stream))
        await waiter

    async def _serve_answer(
        self, request: web.Request, answer: Answer, parsed: ChatCompletionRequest
    ) -> web.StreamResponse:
        completion_id = next_id("chatcmpl")
        if not self.report_usage:
            answer = dataclasses.replace(answer, usage=None)
        if not parsed.stream:
            return web.json_response(completion_body(answer, completion_id=completion_id, model=parsed.model))
        chunks = stream_chunks(
            answer, completion_id=completion_id, model=parsed.model, include_usage=parsed.include_usage
        )
        response = await self._open_stream(request)
        pause_after, times = self._pause_after, self.chunk_times
        if self.chunk_delay_ms <= 0 and pause_after is None and times is None:  # one write: the benchmarks' fast path
            await response.write(b"".join(_sse(c) for c in chunks) + _sse("[DONE]"))
        else:
            for index, chunk in enumerate(chunks):
                if index == pause_after:
                    await self._until_released(mid_stream=True)
                if times is not None:  # before the write: a client may read the chunk before this task resumes
                    times.append((time.monotonic(), chunk))
                await response.write(_sse(chunk))
                if self.chunk_delay_ms > 0:
                    await asyncio.sleep(self.chunk_delay_ms / 1000.0)  # simulated token pace, not a wait
            await response.write(_sse("[DONE]"))
        await response.write_eof()
        return response

    async def _open_stream(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        return response

    async def _serve_fault(
        self, request: web.Request, fault: Fault, parsed: ChatCompletionRequest
    ) -> web.StreamResponse:
        if fault.kind == "http_error":
            headers: dict[str, str] = {}
            if fault.retry_after is not None:
                headers["retry-after"] = _retry_after_seconds(fault.retry_after)
                headers["retry-after-ms"] = str(round(fault.retry_after * 1000))
            message = fault.message or f"scripted fault: HTTP {fault.status}"
            if fault.echo_header:
                message += f" (you sent {fault.echo_header}: {request.headers.get(fault.echo_header, '')})"
            body = error_body(message, type_=_error_type(fault.status), code=fault.code)
            return web.json_response(body, status=fault.status, headers=headers)
        if fault.kind == "billed":
            return await self._serve_billed_failure(request, fault, parsed)
        if fault.kind == "malformed":
            if not parsed.stream:
                return web.Response(status=200, text=_TRUNCATED_JSON, content_type="application/json")
            response = await self._open_stream(request)
            await response.write(_sse(_TRUNCATED_JSON) + _sse("[DONE]"))
            await response.write_eof()
            return response
        # disconnect: drop the connection (mid-stream when streaming) so the client sees a transport error.
        response = await self._open_stream(request) if parsed.stream else web.StreamResponse()
        if parsed.stream:
            await response.write(b": scripted disconnect\n\n")
        if request.transport is not None:
            request.transport.abort()
        return response


    async def _serve_billed_failure(
        self, request: web.Request, fault: Fault, parsed: ChatCompletionRequest
    ) -> web.StreamResponse:
        text = "an answer that never arrives whole"
        usage = scripted_usage(estimate_usage(parsed, text, []), fault.usage)
        answer = Answer(text=text, tool_calls=[], finish_reason="stop", usage=usage)
        completion_id = next_id("chatcmpl")
        if not parsed.stream:
            return web.json_response({**completion_body(answer, completion_id=completion_id, model=parsed.model),
                                      "choices": []})
        response = await self._open_stream(request)
        chunks = stream_chunks(answer, completion_id=completion_id, model=parsed.model,
                               include_usage=parsed.include_usage)
        error = error_body(fault.message or "scripted fault: the stream broke", type_="server_error", code=fault.code)
        await response.write(b"".join(_sse(c) for c in chunks) + _sse(error))
        await response.write_eof()
        return response


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        return f"{'.'.join(str(p) for p in error['loc']) or 'body'}: {error['msg']}"
    return "body is not valid JSON"


def _retry_after_seconds(seconds: float) -> str:
    # The header carries whole seconds; sub-second test delays are still exact in `retry-after-ms`.
    return str(max(0, round(seconds)))


def _error_type(status: int) -> str:
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    if status in (401, 403):
        return "authentication_error"
    return "invalid_request_error"
