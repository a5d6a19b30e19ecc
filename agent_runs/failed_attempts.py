"""The usage of model call attempts that failed after the provider reported it (billed, though the call failed),
kept across the durable retries of `call_model` on the run record (`RunRecord.failed_call_usage`, by iteration).

A failing attempt adds its usage to its iteration's entry before the durable retry (or before its run fails). The
entry is counted once, by one sum (`counting_failed_attempts`): the attempt that answers adds it to its turn, so the
loop's budget counts every billed attempt once; a run that ends with the call unanswered (failed, cancelled) adds it
to the usage it is closed with. A run closed without its loop's count (its orchestration crashed or was terminated)
adds every entry to its stored answers' usage instead (`all_failed_attempts`; the answers store none of it). The
entry is never cleared: the turn that read it is handed to the loop once, later iterations read their own entry, and
a rewound run goes on from the loop's state before the failed call.

An entry is the usage's JSON plus the ids of the attempts in it (`attempts`; entries written before had none): an
attempt adds itself by etag, reading the record again when it changed meanwhile, and stops once it finds its id, so a
write that went through unacknowledged is not added twice.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from agent_runtime.loop_types import ModelTurn
from agent_runtime.messages import Usage
from session_store import ConflictError
from session_store.records import RunRecord

from .context import StepContext

logger = logging.getLogger(__name__)

_ATTEMPTS = "attempts"
KEEP_ROUNDS = 5  # writes of one attempt's usage, each after the record changed meanwhile
KEPT_ATTEMPT_IDS = 16  # an attempt checks for its own id right after its write: the latest ids are enough


def new_attempt_id() -> str:
    """An id for one execution of `call_model` (each one calls the model again: a billed attempt of its own)."""
    return uuid.uuid4().hex[:16]


def _entry(record: RunRecord | None, iteration: int | str) -> tuple[Usage | None, list[str]]:
    kept: dict[str, Any] | None = record.failed_call_usage.get(str(iteration)) if record is not None else None
    if not kept:
        return None, []
    attempts = [str(attempt) for attempt in kept.get(_ATTEMPTS) or []]
    return Usage.model_validate({k: v for k, v in kept.items() if k != _ATTEMPTS}), attempts


def counting_failed_attempts(usage: Usage, record: RunRecord | None, iteration: int | None) -> Usage:
    """`usage` with what the failed attempts of the iteration's model call were billed (as it is when none were)."""
    kept = _entry(record, iteration)[0] if iteration is not None else None
    return usage if kept is None else kept + usage


def all_failed_attempts(record: RunRecord) -> Usage:
    """What every failed attempt of the run was billed (each iteration's entry once)."""
    return sum((_entry(record, iteration)[0] or Usage() for iteration in record.failed_call_usage), Usage())


def with_failed_attempts(turn: ModelTurn, record: RunRecord | None, iteration: int) -> ModelTurn:
    """The turn with the usage its iteration's failed attempts kept (as it is when there is none)."""
    usage = counting_failed_attempts(turn.usage, record, iteration)
    return turn if usage is turn.usage else turn.model_copy(update={"usage": usage})


async def keep_failed_attempt(
    ctx: StepContext, record: RunRecord | None, iteration: int, usage: Usage | None, attempt: str
) -> None:
    """Add a failed attempt's reported usage to its iteration's entry (nothing to do when none was reported).
    `record`: the run as last read; `attempt`: the attempt's id (`new_attempt_id`)."""
    if usage is None or record is None:
        return
    for _ in range(KEEP_ROUNDS):
        kept, attempts = _entry(record, iteration)
        if attempt in attempts:  # an earlier write of this attempt went through
            return
        entry = {
            **(usage + kept).model_dump(mode="json", exclude_none=True),
            _ATTEMPTS: [*attempts, attempt][-KEPT_ATTEMPT_IDS:],
        }
        changes = {**record.failed_call_usage, str(iteration): entry}
        try:
            await ctx.store.update_run(record.run_id, if_match=record.etag, current=record, failed_call_usage=changes)
            return
        except ConflictError:  # changed since it was read (maybe by another attempt): add to what it holds now
            record = await ctx.record()
            if record is None:
                return
        except Exception:  # the model error goes on all the same; only this count is lost
            logger.warning("could not keep the usage of a failed model call of run %s", record.run_id, exc_info=True)
            return
    logger.warning("could not keep the usage of a failed model call of run %s: it kept changing", record.run_id)
