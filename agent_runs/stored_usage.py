"""A run's usage as the store holds it: each model call's on its answer's last message (`steps.call_model_step`),
and what failed attempts were billed on the run record (`failed_attempts`). The Responses API's turns read their
calls' from it; a run closed without its loop's count (its orchestration crashed or was terminated) is closed with it.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent_runs.failed_attempts import all_failed_attempts
from agent_runtime.messages import Usage
from session_store import MessageRecord, RunRecord


def calls_usage(run_id: str, records: Iterable[MessageRecord]) -> Usage:
    """The usage of the model calls whose answers are among `records` (the run's messages), each call's once: a call
    redelivered after a longer first answer leaves that answer's last message (and its usage) behind, and the new
    answer's usage holds it too (`steps._split_own_answer`), so a call counts its largest."""
    model_ids = f"{run_id}:model:"
    calls: dict[str, Usage] = {}
    for record in records:
        if record.payload.get("usage"):
            usage = Usage.model_validate(record.payload["usage"])
            call = record.message_id
            if call.startswith(model_ids):  # `<run>:model:<iteration>:<index>`: one call's messages
                call = call.rpartition(":")[0]
            kept = calls.get(call)
            if kept is None or usage.total_tokens > kept.total_tokens:
                calls[call] = usage
    return sum(calls.values(), Usage())


def stored_run_usage(run: RunRecord, records: Iterable[MessageRecord]) -> Usage:
    """Everything the run was billed, as the store holds it (`records`: the run's messages): its calls' answers and
    its failed attempts. What its loop counts too: an answered call's turn adds its iteration's failed attempts
    (`with_failed_attempts`), the close adds the unanswered call's."""
    return calls_usage(run.run_id, records) + all_failed_attempts(run)
