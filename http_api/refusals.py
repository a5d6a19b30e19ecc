"""What it meant that an orchestration refused an event or a start, read right after the refusal.

The SDK raises when the host refuses: an event to an instance that has ended (410) or does not exist yet (404), a
start of an instance that already runs. Cancel (`run_lifecycle.cancel`), a workflow signal (`workflows`) and a
rewind's continuation (`rewind`) each decide from the same two reads what the refusal was: the run finished meanwhile
(too late: the caller's 409), no orchestration runs (not started yet, or ended under an open run), or one runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from http_api.durable_gateway import STILL_RUNNING, OrchestrationState
from session_store import RunRecord


@dataclass(frozen=True)
class Refusal:
    """`run`: the run's record as it is now (None if it was deleted, or not asked for); `state`: its orchestration's
    (None if there is none, or not read because the run has finished)."""

    run: RunRecord | None
    state: OrchestrationState[Any] | None

    @property
    def finished(self) -> RunRecord | None:
        """The run, if it finished since it was read: the event came too late."""
        return self.run if self.run is not None and self.run.finished else None

    @property
    def running(self) -> bool:
        """An orchestration runs: the refusal was not about the run's life (the caller re-raises, or it raced a start
        of the same instance)."""
        return self.state is not None and self.state.runtime_status in STILL_RUNNING


async def read_refusal(
    state: Callable[[], Awaitable[OrchestrationState[Any] | None]],
    run: Callable[[], Awaitable[RunRecord | None]] | None = None,
) -> Refusal:
    """Read the run again (when `run` is given), then - unless it has finished - its orchestration's `state`."""
    current = await run() if run is not None else None
    if current is not None and current.finished:
        return Refusal(current, None)
    return Refusal(current, await state())
