"""The app process's garbage-collector policy: collect the youngest generation less often.

CPython's default first-generation threshold (700 allocations of container objects; 2,000 from 3.13) makes a durable
turn run the cyclic collector dozens of times, each pass walking every young object: ~2 % of a turn's CPU, for
almost nothing to free (the app's data are trees, not cycles; reference counting frees them). 10,000 keeps the
young generation a few MB at most. A threshold already above it (set by the host or the user) is left alone, as are
the older generations' thresholds and `gc.disable()`.
"""

from __future__ import annotations

import gc

YOUNG_GENERATION_THRESHOLD = 10_000


def tune_garbage_collector() -> None:
    """Raise the youngest generation's collection threshold to `YOUNG_GENERATION_THRESHOLD` (never lower it)."""
    young, *older = gc.get_threshold()
    if young < YOUNG_GENERATION_THRESHOLD:
        gc.set_threshold(YOUNG_GENERATION_THRESHOLD, *older)
