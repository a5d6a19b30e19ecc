"""The app's logs through the host, as Azure's worker sends them: each record an `RpcLog` message on the stream.

On Azure the Python worker hands every log record of the app (and of the library) to the Functions host as an
`RpcLog` (category = the logger's name, its level, its message, the exception); the host writes them to its own
logs. devhost's worker process does the same (`HostLogHandler`), and the host re-emits each record under the same
logger name in its own process (`emit_in_host`), so `logging` configuration, `caplog` and the console see the app's
records wherever the app ran. Records of devhost's own worker logger stay in the worker's stderr.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from devhost.worker import rpc
from devhost.worker.wire import encode

FORWARDED_LEVEL = logging.INFO  # the host's default level for function logs ("Information")
OWN_LOGGER = "devhost"
_TO_RPC = ((logging.CRITICAL, "Critical"), (logging.ERROR, "Error"), (logging.WARNING, "Warning"),
           (logging.INFO, "Information"), (logging.DEBUG, "Debug"))
_FROM_RPC = {"Trace": logging.DEBUG, "Debug": logging.DEBUG, "Information": logging.INFO,
             "Warning": logging.WARNING, "Error": logging.ERROR, "Critical": logging.CRITICAL}


def _rpc_level(levelno: int) -> int:
    name = next((name for threshold, name in _TO_RPC if levelno >= threshold), "Trace")
    return rpc.RpcLog.Level.Value(name)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def is_own(record: logging.LogRecord) -> bool:
    return record.name == OWN_LOGGER or record.name.startswith(OWN_LOGGER + ".")


class HostLogHandler(logging.Handler):
    """Sends each record (from any thread) to the host as an `RpcLog`, on the loop that owns the connection."""

    def __init__(self, send: Callable[[bytes], Any], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(FORWARDED_LEVEL)
        self._send, self._loop = send, loop
        self.addFilter(lambda record: not is_own(record))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            exception = None
            if record.exc_info and record.exc_info[1] is not None:
                error = record.exc_info[1]
                exception = rpc.RpcException(message=f"{type(error).__name__}: {error}",
                                             stack_trace=logging.Formatter().formatException(record.exc_info))
            message = rpc.RpcLog(category=record.name, level=_rpc_level(record.levelno), message=record.getMessage(),
                                 log_category=rpc.RpcLog.RpcLogCategory.Value("User"))
            if exception is not None:
                message.exception.CopyFrom(exception)
            frame = encode(rpc.StreamingMessage(rpc_log=message))
            if _running_loop() is self._loop:
                self._send(frame)
            else:  # a thread of the library's pool: the connection belongs to the loop
                self._loop.call_soon_threadsafe(self._send, frame)
        except Exception:  # a log that cannot be sent must not break the code that logged it
            self.handleError(record)


def forward_to_host(send: Callable[[bytes], Any], loop: asyncio.AbstractEventLoop) -> HostLogHandler:
    """Forward the app's records from now on: the root logger passes INFO and up to the host (the worker's own
    stderr handler keeps its level and, from now on, only devhost's records)."""
    handler = HostLogHandler(send, loop)
    root = logging.getLogger()
    for existing in root.handlers:
        existing.addFilter(is_own)
    root.addHandler(handler)
    if root.level > FORWARDED_LEVEL or root.level == logging.NOTSET:
        root.setLevel(FORWARDED_LEVEL)
    return handler


def emit_in_host(log: Any, worker_pid: int) -> None:
    """Re-emit a worker's `RpcLog` under its logger name in this (the host's) process."""
    level = _FROM_RPC.get(rpc.RpcLog.Level.Name(log.level), logging.INFO)
    text = log.message
    if log.HasField("exception") and log.exception.stack_trace:
        text = f"{text}\n{log.exception.stack_trace}"
    logging.getLogger(log.category or "function").log(level, text, extra={"worker_pid": worker_pid})
