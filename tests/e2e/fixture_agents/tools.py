"""Tools of the test agents: plain, approval-gated with a strict schema, large results, and one that can be held
in flight so a test can kill the host while it runs."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated

from pydantic import Field

from agent_runtime.tools import ToolContext, tool
from served_agents.assistant import send_email  # the demo tool itself: records the email once per idempotency key

__all__ = ["big_result", "lookup", "send_email", "slow_step", "transfer"]

MARKER_DIR_SETTING = "E2E_MARKER_DIR"
BIG_RESULT_BYTES = 50 * 1024
HOLD_LIMIT_SECONDS = 60.0  # a held call never outlives a broken test by much


@tool
def lookup(key: Annotated[str, Field(min_length=1, max_length=64)]) -> dict:
    """Look a key up (deterministic, no side effect)."""
    return {"key": key, "value": f"value-of-{key}"}


@tool(approval="always")
async def transfer(
    account: Annotated[str, Field(pattern=r"^[A-Z]{2}[0-9]{4}$", description="Account id, e.g. GB1234")],
    amount: Annotated[int, Field(ge=1, le=1000, description="Whole euros")],
    context: ToolContext,
) -> dict:
    """Transfer money (recorded once in the effect ledger; a person approves every transfer)."""
    stored, created = await context.record_effect_once("transfer", {"account": account, "amount": amount})
    return {"status": "done" if created else "already_done", **stored}


@tool
def big_result(index: Annotated[int, Field(ge=0)]) -> dict:
    """Return a large document (about 50 KB) so runs carry big tool results."""
    line = f"row {index:04d}: lorem ipsum dolor sit amet, consectetur adipiscing elit. "
    text = (line * (BIG_RESULT_BYTES // len(line) + 1))[:BIG_RESULT_BYTES]
    return {"index": index, "text": text}


@tool
async def slow_step(label: Annotated[str, Field(min_length=1, max_length=64)], context: ToolContext) -> dict:
    """Record an effect, then hold the call until the test releases it.

    Every attempt appends a line to `<E2E_MARKER_DIR>/slow_step.started` (so the test knows the tool is running and
    how often it ran); the call then waits for `<E2E_MARKER_DIR>/slow_step.release`. The crash test kills the host
    while the first attempt waits, releases, restarts: the redelivered attempt finishes.
    """
    stored, created = await context.record_effect_once("slow_step", {"label": label})
    marker_dir = Path(os.environ[MARKER_DIR_SETTING])
    with (marker_dir / "slow_step.started").open("a", encoding="utf-8") as started:
        started.write(f"{context.idempotency_key}\n")
    release = marker_dir / "slow_step.release"
    deadline = asyncio.get_running_loop().time() + HOLD_LIMIT_SECONDS
    while not release.exists():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("slow_step was never released")
        await asyncio.sleep(0.02)  # a file is the only signal that crosses a process kill
    return {"label": stored["label"], "first_attempt": created}
