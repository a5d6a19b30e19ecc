"""What a client may read of a run's or workflow's error: a stable code and a safe message.

Failures of our own code paths (a crashed orchestration, an activity that failed for good) carry Python exception
text or Durable's failure text ("Orchestrator function 'agent_run' failed: ..."); that detail is for operators: it is
logged with a correlation id where the failure is first seen, and the client gets a fixed message per code naming
that id. Errors the product produces on purpose (a model refusal, a rejected gate, a timeout) keep their message,
unless it looks like exception text, which is replaced all the same.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

log = logging.getLogger("agent_runs")

SAFE_MESSAGES = {
    "run_crashed": "The run stopped unexpectedly and was closed as failed.",
    "run_terminated": "The run was terminated before it finished.",
    "model_call_failed": "A model call failed after its retries.",
    "tool_call_failed": "A tool call failed after its retries.",
    "activity_failed": "An internal step failed after its retries.",
    "start_failed": "The run could not be started.",
}
GENERIC_MESSAGE = "The run failed because of an internal error."
# Durable failure text, a traceback, or `SomethingError: ...` / `SomethingException: ...` (Python's str of an error).
_EXCEPTION_TEXT = re.compile(
    r"Orchestrator function '|Activity function '|Traceback \(most recent call last\)|\b[A-Z]\w*(Error|Exception)\b:"
)
_CORRELATION = re.compile(r"\(correlation id [0-9a-f-]{8,}\)")


def leaks(message: str) -> bool:
    return bool(_EXCEPTION_TEXT.search(message))


def crash_error(code: str, detail: str, instance_id: str) -> dict[str, Any]:
    """The error stored for an orchestration that died (`code`: run_crashed / run_terminated): its Durable failure
    text is logged under a new correlation id; the stored message is the safe one naming that id."""
    correlation_id = uuid.uuid4().hex
    log.error("%s: orchestration %s (correlation id %s): %s", code, instance_id, correlation_id, detail[:4000])
    return {"code": code, "message": f"{SAFE_MESSAGES.get(code, GENERIC_MESSAGE)} (correlation id {correlation_id})"}


def client_message(code: str, message: str) -> str:
    """The message a view shows for a stored error."""
    correlation = _CORRELATION.search(message or "")
    if code in SAFE_MESSAGES:
        safe = SAFE_MESSAGES[code]
    elif leaks(message or ""):
        safe = GENERIC_MESSAGE
    else:
        return message
    return f"{safe} {correlation.group(0)}" if correlation else safe
