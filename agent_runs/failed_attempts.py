"""The usage of model call attempts that failed after the provider reported it (billed, though the call failed),
kept across the durable retries of `call_model` on the run record (`RunRecord.failed_call_usage`, by iteration).

A failing attempt adds its usage to its iteration's entry before the durable retry (or before its run fails). The
entry is counted once, by one sum (`counting_failed_attempts`): the attempt that answers adds it to its turn, so the
loop's budget counts every billed attempt once; a run that ends with the call unanswered (failed, cancelled) adds it
to the usage it is closed with. The entry is never cleared: the turn that read it is handed to the loop once, later
iterations read their own entry, and a rewound run goes on from the loop's state before the failed call.
"""

from __future__ import annotations

import logging
from typing import Any

from agent_runtime.loop_types import ModelTurn
from agent_runtime.messages import Usage
from session_store.records import RunRecord

from .context import StepContext

logger = logging.getLogger(__name__)

_ATTEMPTS = "attempts"


def _entry(record: RunRecord | None, iteration: int) -> tuple[Usage | None, list[str]]:
    kept: dict[str, Any] | None = record.failed_call_usage.get(str(iteration)) if record is not None else None
    if not kept:
        return None, []
    attempts = [str(attempt) for attempt in kept.get(_ATTEMPTS) or []]
    return Usage.model_validate({k: v for k, v in kept.items() if k != _ATTEMPTS}), attempts


def counting_failed_attempts(usage: Usage, record: RunRecord | None, iteration: int | None) -> Usage:
    """`usage` with what the failed attempts of the iteration's model call were billed (as it is when none were)."""
    kept = _entry(record, iteration)[0] if iteration is not None else None
    return usage if kept is None else kept + usage


def with_failed_attempts(turn: ModelTurn, record: RunRecord | None, iteration: int) -> ModelTurn:
    """The turn with the usage its iteration's failed attempts kept (as it is when there is none)."""
    usage = counting_failed_attempts(turn.usage, record, iteration)
    return turn if usage is turn.usage else turn.model_copy(update={"usage": usage})


async def keep_failed_attempt(ctx: StepContext, record: RunRecord | None, iteration: int, usage: Usage | None) -> None:
    """Add a failed attempt's reported usage to its iteration's entry (nothing to do when none was reported)."""
    if usage is None or record is None:
        return
    total = usage + _entry(record, iteration)[0]
    kept = {**record.failed_call_usage, str(iteration): total.model_dump(mode="json", exclude_none=True)}
    try:
        await ctx.store.update_run(record.run_id, current=record, failed_call_usage=kept)
    except Exception:  # the model error goes on all the same; only this count is lost
        logger.warning("could not keep the usage of a failed model call of run %s", record.run_id, exc_info=True)
