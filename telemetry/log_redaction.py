"""Log records are redacted when they are created (`install_log_redaction`, see `telemetry.redaction`).

Apart from the span classes so that start-up, which always installs it, does not import the OpenTelemetry SDK's
trace module (only a process exporting spans needs it).

A traceback may quote what a peer answered, cut by a library (a pydantic error's `input_value=b'...secr...xxx'`):
tracebacks, stack traces and the message of a record with an exception (asyncio's "Task exception was
never retrieved" quotes the exception in the task's repr) are masked as quoted text (`redact_quoted`, a secret's
start or end at the cut as well). A traceback's exception messages may be a peer's text (an MCP server's error is
the cause of the app's own): each is escaped to one line (`peer_text`), the traceback keeps its own line feeds and has
its other control characters escaped. The `mcp` SDK's loggers quote servers in any record: their messages are masked
so too and have their control characters escaped (`peer_text`). Every other message takes plain `redact`: this runs
for every record, and `redact_quoted` tries every cut of every secret (error paths only)."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from agent_runtime.peer_text import escape_controls, peer_text
from agent_runtime.redaction import redact, redact_quoted

Mask = Callable[[str], str]

_installed = False


def install_log_redaction() -> None:
    """Make every log record of this process redacted at creation (once per process)."""
    global _installed
    if _installed:
        return
    _installed = True
    make_record = logging.getLogRecordFactory()

    def redacted_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        failed = bool(record.exc_info and record.exc_info[1] is not None)
        try:
            _redact_message(record, _message_mask(record.name, failed))
        except Exception:  # a bad format string: keep the record as logging would report it
            return record
        if failed:
            record.exc_text = _traceback_text(record.exc_info)  # type: ignore[arg-type]
            record.exc_info = None  # handlers that format the exception themselves would see the raw text
        if record.stack_info:
            record.stack_info = escape_controls(redact_quoted(record.stack_info), keep_line_feeds=True)
        return record

    logging.setLogRecordFactory(redacted_record)


def _traceback_text(exc_info: tuple[type[BaseException], BaseException, TracebackType | None]) -> str:
    """The traceback, masked, one line per line of its own. The message and notes of each exception in it (its causes
    and a group's members too) may be a peer's text (an MCP server's JSON-RPC error is the cause of the app's error):
    each is masked and escaped to one line (`peer_text`), as a forged line break or terminal escape in them would be
    anywhere else. The rest keeps its line feeds and has every other control character escaped."""
    _type, error, trace = exc_info
    formatted = traceback.TracebackException(type(error), error, trace, compact=True)
    for exception in _chained(formatted):
        exception._str = peer_text(exception._str)  # what `format` writes as the message (3.11 to 3.13)
        notes = exception.__notes__
        if isinstance(notes, list):
            exception.__notes__ = [peer_text(note) if isinstance(note, str) else note for note in notes]
    return escape_controls(redact_quoted("".join(formatted.format()).rstrip("\n")), keep_line_feeds=True)


def _chained(first: traceback.TracebackException) -> list[traceback.TracebackException]:
    """`first` and every exception its traceback shows: causes, contexts and the members of exception groups."""
    found: dict[int, traceback.TracebackException] = {}
    pending: list[traceback.TracebackException | None] = [first]
    while pending:
        exception = pending.pop()
        if exception is None or id(exception) in found:
            continue
        found[id(exception)] = exception
        pending += [exception.__cause__, exception.__context__, *(getattr(exception, "exceptions", None) or ())]
    return list(found.values())


def _message_mask(logger_name: str, failed: bool) -> Mask:
    """`peer_text` for the `mcp` SDK's loggers (`mcp.client.streamable_http`...); `redact_quoted` for a record with an
    exception, whose message may quote it (asyncio's "Task exception was never retrieved" holds the task's repr, the
    exception's text in it); plain `redact` for every other record."""
    if logger_name.startswith("mcp") and (len(logger_name) == 3 or logger_name[3] == "."):
        return peer_text
    return redact_quoted if failed else redact


def _redact_message(record: logging.LogRecord, mask: Mask) -> None:
    """Mask secrets in the record's message. The arguments stay arguments where masking them one by one is enough:
    formatters that read `record.args` (uvicorn's access log unpacks its five) keep working."""
    message = record.getMessage()
    clean = mask(message)
    if clean == message:
        return
    safe_args = _redacted_args(record.args, mask)
    if safe_args is not None:
        try:
            redone = str(record.msg) % safe_args
        except (TypeError, ValueError, KeyError):
            redone = None
        if redone is not None and mask(redone) == redone:
            record.args = safe_args
            return
    record.msg, record.args = clean, None  # the secret was in the template, or in how an argument formats


def _redacted_args(args: Any, mask: Mask) -> tuple[Any, ...] | Mapping[str, Any] | None:
    if isinstance(args, tuple) and args:
        return tuple(_redacted_arg(a, mask) for a in args)
    if isinstance(args, Mapping) and args:
        return {key: _redacted_arg(value, mask) for key, value in args.items()}
    return None


def _redacted_arg(value: Any, mask: Mask) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    text = str(value)
    clean = mask(text)
    return value if clean == text else clean  # a masked object becomes its masked text
