"""One real-worker process: Azure's Python worker library (`azure-functions-runtime`) driven by the host's messages.

`python -m devhost.worker --connect 127.0.0.1:PORT` with the host's token in `DEVHOST_WORKER_TOKEN`. What Azure's
worker process (the proxy in front of the library on 3.13+) does, minus gRPC: send `StartStream`, then hand every
`WorkerInitRequest`, `FunctionsMetadataRequest`, `FunctionLoadRequest` and `InvocationRequest` to the library's
handler of the same name with the `protos` namespace it builds its responses from (devhost.worker.rpc), and send
each response back tagged with the request's id. Invocations run concurrently (sync functions on the library's
thread pool). The library imports, indexes, converts and invokes; this module only carries messages. It exits when
the host's connection closes, so a host that stops or dies never leaves a worker behind. Log records go to the host
as `RpcLog` messages (devhost.worker.logs).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from devhost.worker import rpc
from devhost.worker.logs import forward_to_host
from devhost.worker.wire import HEADER_BYTES, MAX_FRAME_BYTES, encode

TOKEN_VARIABLE = "DEVHOST_WORKER_TOKEN"
LOOPBACK = "127.0.0.1"
log = logging.getLogger("devhost.worker")


@dataclass
class LibraryRequest:
    """The shape the library's handlers read: `.request` (the StreamingMessage) and `.properties`."""

    request: Any
    properties: dict[str, Any] = field(default_factory=dict)


_HANDLERS = {
    "worker_init_request": ("worker_init_request", "worker_init_response"),
    "functions_metadata_request": ("functions_metadata_request", "function_metadata_response"),
    "function_load_request": ("function_load_request", "function_load_response"),
    "invocation_request": ("invocation_request", "invocation_response"),
}


class LibraryWorker:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        import azure_functions_runtime

        self.library = azure_functions_runtime
        self.library.start_threadpool_executor()
        self._writer = writer
        self._tasks: set[asyncio.Task[None]] = set()

    def dispatch(self, message: Any) -> bool:
        """Handle one message; False when the host asked the worker to stop."""
        content = message.WhichOneof("content")
        if content == "worker_terminate":
            return False
        if content not in _HANDLERS:
            log.warning("devhost worker: ignoring a %s message", content)
            return True
        task = asyncio.create_task(self._handle(message, content))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _handle(self, message: Any, content: str) -> None:
        handler_name, response_field = _HANDLERS[content]
        handler = getattr(self.library, handler_name)
        request = LibraryRequest(message, {"protos": rpc, "host": LOOPBACK})
        try:
            response = await handler(request)
        except BaseException as exc:  # the library answers failures itself; anything else must not hang the host
            log.exception("devhost worker: %s failed", handler_name)
            response = _failure(content, message, exc)
        reply = rpc.StreamingMessage(request_id=message.request_id)
        getattr(reply, response_field).CopyFrom(response)
        self._writer.write(encode(reply))


def _failure(content: str, message: Any, exc: BaseException) -> Any:
    result = rpc.StatusResult(status=rpc.StatusResult.Failure,
                              exception=rpc.RpcException(message=f"{type(exc).__name__}: {exc}"))
    if content == "invocation_request":
        return rpc.InvocationResponse(invocation_id=message.invocation_request.invocation_id, result=result)
    if content == "function_load_request":
        return rpc.FunctionLoadResponse(function_id=message.function_load_request.function_id, result=result)
    if content == "functions_metadata_request":
        return rpc.FunctionMetadataResponse(result=result)
    return rpc.WorkerInitResponse(result=result)


async def _read(reader: asyncio.StreamReader) -> Any | None:
    try:
        size = int.from_bytes(await reader.readexactly(HEADER_BYTES), "big")
        if size > MAX_FRAME_BYTES:
            return None
        return rpc.StreamingMessage.FromString(await reader.readexactly(size))
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


async def serve(host: str, port: int, token: str) -> int:
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as exc:  # the host is gone already: nobody to work for
        print(f"devhost worker: cannot reach the host at {host}:{port}: {exc}", file=sys.stderr, flush=True)
        return 3
    sock = writer.get_extra_info("socket")
    if sock is not None:  # small request/response frames: no Nagle delay
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    writer.write(encode(rpc.StreamingMessage(start_stream=rpc.StartStream(worker_id=token))))
    forward_to_host(writer.write, asyncio.get_running_loop())
    worker = LibraryWorker(writer)
    while (message := await _read(reader)) is not None:
        if not worker.dispatch(message):
            break
    # Leaving cancels the web extension's server task (HTTP v2): its lifespan reports that as an error otherwise.
    logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
    return 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m devhost.worker", description=__doc__)
    parser.add_argument("--connect", required=True, help="HOST:PORT of the devhost that started this worker")
    parser.add_argument("--log-level", default="WARNING")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the host decides when its workers stop
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s [worker %(process)d] %(name)s: %(message)s")
    host, _, port = args.connect.rpartition(":")
    # Not asyncio.run: at the end it would cancel the calls in flight (their code would run on: spans end and are
    # exported, `finally` blocks write) and wait for the executor's threads. A worker whose host is gone ends at once,
    # as Azure's does when its host dies: calls in flight simply stop.
    loop = asyncio.new_event_loop()
    code = loop.run_until_complete(serve(host, int(port), os.environ.pop(TOKEN_VARIABLE, "")))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
