"""The input of a queued run waits in the session's effect ledger (not in the conversation: the active run's model
must not see it) until the run takes its turn and writes it at the start of its own block."""

from __future__ import annotations

from collections.abc import Sequence

from agent_runtime.messages import Message
from session_store import SessionStore

QUEUED_INPUT_KIND = "queued_input"


def queued_input_key(run_id: str) -> str:
    return f"queued-input.{run_id}"


async def keep_queued_input(store: SessionStore, session_id: str, run_id: str, messages: Sequence[Message]) -> None:
    """Idempotent (create-if-absent by key): a retried start keeps the first copy."""
    payload = {"messages": [message.model_dump(mode="json") for message in messages]}
    await store.record_effect(session_id, queued_input_key(run_id), QUEUED_INPUT_KIND, payload)
