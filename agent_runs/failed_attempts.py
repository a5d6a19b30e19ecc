"""The usage of model call attempts that failed after the provider reported it (billed, though the call failed),
kept across the durable retries of `call_model` on the run record (`RunRecord.failed_call_usage`, by iteration).

A failing attempt adds its usage to its iteration's entry before the durable retry; the attempt that answers adds
the entry to its turn, so the loop's budget counts every billed attempt once. The entry is never cleared: the turn
that read it is handed to the loop once, and later iterations read their own entry.
"""

from __future__ import annotations

import logging

from agent_runtime.loop_types import ModelTurn
from agent_runtime.messages import Usage
from session_store.records import RunRecord

from .context import StepContext

logger = logging.getLogger(__name__)


def failed_attempts_usage(record: RunRecord | None, iteration: int) -> Usage | None:
    kept = record.failed_call_usage.get(str(iteration)) if record is not None else None
    return Usage.model_validate(kept) if kept else None


def with_failed_attempts(turn: ModelTurn, record: RunRecord | None, iteration: int) -> ModelTurn:
    """The turn with the usage its iteration's failed attempts kept (as it is when there is none)."""
    kept = failed_attempts_usage(record, iteration)
    return turn if kept is None else turn.model_copy(update={"usage": kept + turn.usage})


async def keep_failed_attempt(ctx: StepContext, record: RunRecord | None, iteration: int, usage: Usage | None) -> None:
    """Add a failed attempt's reported usage to its iteration's entry (nothing to do when none was reported)."""
    if usage is None or record is None:
        return
    total = usage + failed_attempts_usage(record, iteration)
    kept = {**record.failed_call_usage, str(iteration): total.model_dump(mode="json", exclude_none=True)}
    try:
        await ctx.store.update_run(record.run_id, current=record, failed_call_usage=kept)
    except Exception:  # the model error goes on to the durable retry all the same; only this count is lost
        logger.warning("could not keep the usage of a failed model call of run %s", record.run_id, exc_info=True)
