"""`take_turn`: a queued run (`if_busy` `enqueue` / `interrupt`) asks whether the session is its own yet.

When it is, the run gets its position in the conversation (the store's `take_turn`: the next ordinal, so queued runs
keep their order) and its input, kept aside while it waited, is written at the start of its block. A run cancelled
while it waited is closed here (it never started, so there is nothing else to close).
"""

from __future__ import annotations

from agent_runs.contracts import TurnInput, TurnResult
from agent_runs.queued_input import QUEUED_INPUT_KIND, queued_input_key
from agent_runs.services import RunServices
from agent_runs.starting import write_input
from agent_runtime.messages import Message
from durable_steps import activity


@activity(compact=True)
async def take_turn(step: TurnInput) -> TurnResult:
    store = RunServices.current().store
    run = await store.get_run(step.run.run_id)
    if run is None:
        raise RuntimeError(f"queued run {step.run.run_id!r} is missing")  # retried by Durable
    if run.finished:
        return TurnResult(cancelled=True)
    if run.cancel_requested_at is not None:
        error = {"code": "cancelled", "message": "cancelled while waiting for the session"}
        await store.finish_run(run.run_id, "cancelled", error=error)
        return TurnResult(cancelled=True)
    turn = await store.take_turn(run.run_id)
    if turn is None:
        return TurnResult()
    key = queued_input_key(run.run_id)
    entries = [e for e in await store.list_effects(run.session_id, kind=QUEUED_INPUT_KIND) if e.key == key]
    if not entries:
        raise RuntimeError(f"the input of queued run {run.run_id!r} is missing")
    messages = [Message.model_validate(m) for m in entries[0].payload["messages"]]
    count = len(await write_input(store, turn, messages))
    return TurnResult(ordinal=turn.ordinal, input_count=count)
