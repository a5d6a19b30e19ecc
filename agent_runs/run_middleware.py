"""Run middleware in a durable run: pre-processing in `run_middleware_before`, post-processing in `finish_run`.

See `agent_runtime.run_middleware` for the split. Here: what each phase persists so it runs once per run however
often Durable delivers the activity. Each phase's outcome is recorded in the session's effect ledger under a key
derived from the run id (create-if-absent: the first completed attempt wins); an attempt that finds its phase's
record returns it without running the middleware again. What a crashed attempt did before recording (the chain
ran, the record was not written) happens again, as for any activity: keep middleware side effects idempotent.

Persisted between the phases (the `before` record): `context.metadata` and `context.options` as the chain left them
at `call_next`, at most `STATE_BUDGET_BYTES` of JSON. Changed input messages are rewritten in the store (same ids
and seqs; added ones after them), so the model sees what the middleware made of the input. Limit: a message the
middleware removed from the input stays stored (the store cannot delete one message).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, Field
from pydantic_core import to_jsonable_python

from agent_runs.context import StepContext
from agent_runs.contracts import FinishResult
from agent_runs.sequence import run_seq_range
from agent_runs.store_log import load_session_records
from agent_runtime.conversation import input_message_id, middleware_answer_message_id
from agent_runtime.messages import Message
from agent_runtime.middleware import AgentRunContext
from agent_runtime.run_middleware import RUN_MIDDLEWARE_INVALID_RESULT, run_after, run_before
from agent_runtime.run_result import RunResult, failure_reason

LEDGER_KIND = "run_middleware"
STATE_BUDGET_BYTES = 8 * 1024
STATE_TOO_LARGE = "run_middleware_state_too_large"


class BeforeRecord(BaseModel):
    """The pre-processing outcome of one run, as recorded in the effect ledger."""

    proceed: bool
    status: str = "completed"
    reason: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)


class AfterRecord(BaseModel):
    """The post-processed result of one run (what `finish_run` stores), as recorded in the effect ledger."""

    status: str
    reason: str
    text: str = ""
    value: Any = None


def _key(run_id: str, phase: str) -> str:
    return f"{run_id}:run-middleware:{phase}"


async def _recorded(ctx: StepContext, phase: str) -> dict[str, Any] | None:
    key = _key(ctx.run.run_id, phase)
    for record in await ctx.store.list_effects(ctx.run.session_id, kind=LEDGER_KIND):
        if record.key == key:
            return record.payload
    return None


async def _record(ctx: StepContext, phase: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Record the phase's outcome; if another attempt recorded first, its outcome is the one that counts."""
    stored, _ = await ctx.store.record_effect(ctx.run.session_id, _key(ctx.run.run_id, phase), LEDGER_KIND, payload)
    return stored.payload


async def _input_messages(ctx: StepContext) -> list[Message]:
    first, last = run_seq_range(ctx.run.ordinal)
    records = await load_session_records(ctx.store, ctx.run.session_id, after_seq=first - 1, up_to_seq=last)
    prefix = input_message_id(ctx.run.run_id, 0)[:-1]
    return [Message.model_validate(r.payload) for r in records if r.message_id.startswith(prefix)]


def _state(context: AgentRunContext) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(metadata, options) as JSON, or None if they are over the budget."""
    metadata = to_jsonable_python(context.metadata, fallback=str)
    options = to_jsonable_python(context.options, fallback=str)
    if len(json.dumps({"m": metadata, "o": options})) > STATE_BUDGET_BYTES:
        return None
    return metadata, options


async def before_phase(
    ctx: StepContext, first_seq: int, slots: int, *, closed: Callable[[], Awaitable[FinishResult | None]]
) -> BeforeRecord:
    """Run the pre-processing once for the run; write changed input and any early answer. A run not pre-processed yet
    that `closed` says is over already (given up before its orchestration started) is not: nothing runs or is
    written, and it ends as closed (not recorded: no middleware ran)."""
    recorded = await _recorded(ctx, "before")
    if recorded is not None:  # a redelivery: the recorded outcome, whatever happened to the run since
        return BeforeRecord.model_validate(recorded)
    if (finished := await closed()) is not None:
        return BeforeRecord(proceed=False, status=finished.status, reason=finished.reason)
    agent = ctx.agent
    original = await _input_messages(ctx)
    context = AgentRunContext(
        agent_name=agent.name,
        messages=[m.model_copy(deep=True) for m in original],
        run_id=ctx.run.run_id,
        session_id=ctx.run.session_id,
    )
    ended = await run_before(agent.run_middleware, context, detailed_errors=agent.include_detailed_errors)
    log = ctx.session_log(first_seq, slots)
    if context.messages != original:
        for index, message in enumerate(context.messages):
            if index < len(original) and message == original[index]:
                continue
            stored = message.model_copy(update={"message_id": input_message_id(ctx.run.run_id, index)})
            await log.append(stored)
    if ended is not None and ended.status not in ("completed", "failed", "cancelled"):
        ended = RunResult(
            run_id=ctx.run.run_id,
            status="failed",
            reason=failure_reason(RUN_MIDDLEWARE_INVALID_RESULT, f"a run cannot end {ended.status}"),
        )
    state = _state(context)
    if state is None:
        ended = RunResult(
            run_id=ctx.run.run_id,
            status="failed",
            reason=failure_reason(
                STATE_TOO_LARGE, f"run middleware metadata/options exceed {STATE_BUDGET_BYTES} bytes"
            ),
        )
        state = ({}, {})
    if ended is not None and ended.status == "completed" and ended.text:
        answer = Message.assistant(ended.text).model_copy(
            update={"message_id": middleware_answer_message_id(ctx.run.run_id), "author_name": agent.name}
        )
        await log.append(answer)
    record = BeforeRecord(
        proceed=ended is None,
        status=ended.status if ended is not None else "completed",
        reason=ended.reason if ended is not None else "",
        metadata=state[0],
        options=state[1],
    )
    return BeforeRecord.model_validate(await _record(ctx, "before", record.model_dump(mode="json")))


async def after_phase(ctx: StepContext, result: RunResult) -> AfterRecord:
    """Run the post-processing once for the run, around its `result`; returns the result to store."""
    recorded = await _recorded(ctx, "after")
    if recorded is not None:
        return AfterRecord.model_validate(recorded)
    agent = ctx.agent
    before = BeforeRecord.model_validate(await _recorded(ctx, "before") or {"proceed": True})
    context = AgentRunContext(
        agent_name=agent.name,
        messages=await _input_messages(ctx),
        run_id=ctx.run.run_id,
        session_id=ctx.run.session_id,
        options=before.options,
        metadata=before.metadata,
    )
    final = await run_after(agent.run_middleware, context, result, detailed_errors=agent.include_detailed_errors)
    value = final.value.model_dump(mode="json") if isinstance(final.value, BaseModel) else final.value
    record = AfterRecord(
        status=final.status,
        reason=final.reason,
        text=final.text,
        value=to_jsonable_python(value, fallback=str),
    )
    return AfterRecord.model_validate(await _record(ctx, "after", record.model_dump(mode="json")))


__all__ = ["AfterRecord", "BeforeRecord", "after_phase", "before_phase"]
