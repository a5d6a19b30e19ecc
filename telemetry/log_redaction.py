"""Log records are redacted when they are created (`install_log_redaction`, see `telemetry.redaction`).

Apart from the span classes so that start-up, which always installs it, does not import the OpenTelemetry SDK's
trace module (only a process exporting spans needs it)."""

from __future__ import annotations

import logging
import traceback
from typing import Any

from agent_runtime.redaction import redact

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
        try:
            record.msg, record.args = redact(record.getMessage()), None
        except Exception:  # a bad format string: keep the record as logging would report it
            return record
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
            record.exc_info = None  # handlers that format the exception themselves would see the raw text
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return record

    logging.setLogRecordFactory(redacted_record)
