"""Where each message of a session sits: `seq = ordinal * POSITIONS_PER_RUN + position`.

Runs of one session are sequential (one active run at a time), so a run's messages follow the previous run's. Inside
a run the orchestrator hands out positions deterministically (replay gives the same numbers) before it schedules the
step that writes them, so concurrent tool activities never race for a number and a retried activity rewrites the
same seq. Gaps are fine: seq only orders; it never counts.
"""

from __future__ import annotations

POSITIONS_PER_RUN = 10**9  # far above any run (40 iterations x a few dozen messages); seq stays exact in a JSON double
SLOTS_PER_MODEL_CALL = 16  # a model answer may hold several messages; each gets the next slot of its block


def seq_for(ordinal: int, position: int) -> int:
    if ordinal < 1:
        raise ValueError(f"run ordinal must be >= 1, got {ordinal}")
    if not 0 <= position < POSITIONS_PER_RUN:
        raise ValueError(f"position {position} is outside a run's range")
    return ordinal * POSITIONS_PER_RUN + position


def run_seq_range(ordinal: int) -> tuple[int, int]:
    """(first, last) seq a run may use, inclusive. A queued run (ordinal 0: no position yet) has an empty range."""
    if ordinal == 0:
        return 0, -1
    first = seq_for(ordinal, 0)
    return first, first + POSITIONS_PER_RUN - 1
