"""Turning a failure of our own code path inside an orchestration (an activity that failed for good, a payload over
the budget) into a stable code and a message safe for clients. The detail (exception text, Durable failure text)
goes to the log only, under a correlation id the message names."""

from __future__ import annotations

import logging

import azure.durable_functions as df

from agent_runs.budget import PAYLOAD_BUDGET_BYTES, PayloadBudgetExceeded
from agent_runtime.tools import EffectLedgerUnavailableError
from session_store import StoreUnavailableError
from workflow_runtime.requests import ACTIVITY_FAILED

log = logging.getLogger("orchestrators")

_OUTAGES = (StoreUnavailableError, EffectLedgerUnavailableError)

PAYLOAD_TOO_LARGE = "payload_too_large"
_BUDGET_MARKERS = ("PayloadBudgetExceeded", "durable payload budget")
_MESSAGES = {
    ACTIVITY_FAILED: "an internal step failed",
    PAYLOAD_TOO_LARGE: f"its data outgrew the {PAYLOAD_BUDGET_BYTES // 1024} KB durable payload budget",
}


def failure_code(error: BaseException) -> str:
    """`payload_too_large` for a payload over the budget (raised here, or by an activity: then only its text says
    so), else `activity_failed`."""
    if isinstance(error, PayloadBudgetExceeded) or any(marker in str(error) for marker in _BUDGET_MARKERS):
        return PAYLOAD_TOO_LARGE
    return ACTIVITY_FAILED


def is_store_outage(error: BaseException) -> bool:
    """Whether an activity failed for good because the store was down: it raised `StoreUnavailableError` (every store
    outage, Cosmos or SQLite, is one; a tool's effect ledger passes it on as `EffectLedgerUnavailableError`), which
    the Durable failure text names (`Activity function 'x' failed: StoreUnavailableError: ...`). The one failure a
    try after a wait may mend; a bug fails alike every time."""
    if isinstance(error, _OUTAGES):
        return True
    text = str(error)
    return any(f"{outage.__name__}: " in text for outage in _OUTAGES)


def report(context: df.DurableOrchestrationContext, code: str, what: str, error: BaseException) -> str:
    """Log the failure's detail once (not again on replays) and return the client-safe message naming its
    correlation id (deterministic: the same on every replay)."""
    correlation_id = str(context.new_uuid())
    if not context.is_replaying:
        detail = str(error).split("\n", 1)[0][:2000]
        log.error(
            "%s in %s of orchestration %s (correlation id %s): %s: %s",
            code, what, context.instance_id, correlation_id, type(error).__name__, detail,
        )
    return f"{_MESSAGES.get(code, 'an internal step failed')} (correlation id {correlation_id})"


def reported(context: df.DurableOrchestrationContext, what: str, error: BaseException) -> tuple[str, str]:
    """A failure of `what` (an activity that failed for good, a payload over the budget): its stable code and its
    client-safe message (`report`)."""
    code = failure_code(error)
    return code, report(context, code, what, error)
